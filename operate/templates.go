package operate

import "embed"

// templates are the operator pages (templates/*.html, one {{define}} each): self-contained
// (inline CSS, no scripts, no external assets), rendered by html/template, which escapes
// every value.
//
//go:embed templates/*.html
var templates embed.FS
