package access

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// ParseTokens reads a tokens file: one NAME:TOKEN per line (the first colon separates them),
// blank lines and lines starting with # ignored. Errors give the line number, never the line.
func ParseTokens(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	seen := map[string]bool{}
	err := eachEntry(r, func(n int, name, secret string) error {
		if !validName(name) || len(secret) < minTokenLength || strings.ContainsAny(secret, " \t") || out[name] != "" || seen[secret] {
			return fmt.Errorf("line %d is not NAME:TOKEN with a name used once and a token of at least %d characters, no spaces, used once", n, minTokenLength)
		}
		out[name], seen[secret] = secret, true
		return nil
	})
	return out, err
}

// ParseUsers reads a users file as htpasswd -B writes it: one NAME:HASH per line with a
// bcrypt hash, blank lines and lines starting with # ignored. Errors give the line number,
// never the line.
func ParseUsers(r io.Reader) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := eachEntry(r, func(n int, name, hash string) error {
		if _, err := bcrypt.Cost([]byte(hash)); err != nil || !validName(name) || out[name] != nil {
			return fmt.Errorf("line %d is not NAME:HASH with a name used once and a bcrypt hash (htpasswd -nB NAME)", n)
		}
		out[name] = []byte(hash)
		return nil
	})
	return out, err
}

// eachEntry calls f with every NAME:SECRET line of r, trimmed, numbered from 1. An empty
// file is an error: it would lock everyone out without saying so.
func eachEntry(r io.Reader, f func(n int, name, secret string) error) error {
	sc := bufio.NewScanner(r)
	entries := 0
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, _ := strings.Cut(line, ":")
		if err := f(n, strings.TrimSpace(name), strings.TrimSpace(secret)); err != nil {
			return err
		}
		entries++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if entries == 0 {
		return fmt.Errorf("no NAME:SECRET line in it")
	}
	return nil
}
