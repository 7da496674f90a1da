package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#+ (.*)$`)
	unsafe  = regexp.MustCompile(`[^\w\- ]`)
)

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
		a := unsafe.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		out[strings.ReplaceAll(a, " ", "-")] = true
	}
	return out
}

// Every relative link in the README and docs/ leads to a file that exists and, with an
// anchor, to a heading of it: the documentation is split over several files.
func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("*/*.md")
	files = append(append(files, more...), "../README.md")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			u := m[1]
			if strings.Contains(u, "://") || strings.HasPrefix(u, "mailto:") || strings.Contains(u, "shared/") {
				continue // the web, and ../shared (beside the repository, not in it)
			}
			p, a, _ := strings.Cut(u, "#")
			target := f
			if p != "" {
				target = filepath.Join(filepath.Dir(f), p)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: %v", f, u, err)
				continue
			}
			if a != "" && strings.HasSuffix(target, ".md") && !anchors(t, target)[a] {
				t.Errorf("%s: link %s: no heading with anchor #%s in %s", f, u, a, target)
			}
		}
	}
}
