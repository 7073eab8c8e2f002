// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"strings"

	"github.com/go-resilient/resilient/internal/contract"
)

// Words is a text that names values of a policy, written once for both of
// its readers: a Go author, who writes the policy's fields
// (runtime/policy's Validate, runtime.NewClient, server.NewGuard), and an
// options author or operator, who writes the options' names (the plugin,
// lint, the override loader). A value is written between braces as its
// Go path from the group or the method the text is about, "{FreshTTL}",
// "{Retry.MaxAttempts}", and one given a value puts it after a colon,
// "{Retry.MaxAttempts: 1}". Go drops the braces ("FreshTTL",
// "Retry.MaxAttempts 1"); Options names each part of the path as the
// options do ("fresh_ttl", "retry.max_attempts: 1"). Text outside the
// braces is the same in both.
//
// "{{" is a brace of the text, and so is any brace but one around a path
// of Go names (each part an upper-case letter followed by letters and
// digits): the checks format their values into Words with their braces
// doubled, so that a value (a method's name) is read as written whatever
// it holds. A value given inside the braces ("{Retry.MaxAttempts: 1}")
// must hold no brace.
//
// The checks whose core names another value (MaxBackoff: "… is shorter
// than {InitialBackoff} …") return Words; each boundary reads them in its
// author's names.
type Words string

// Go is w as a Go author reads it: "Retry.MaxAttempts 1".
func (w Words) Go() string { return w.render(false) }

// Options is w as an options author reads it: "retry.max_attempts: 1".
func (w Words) Options() string { return w.render(true) }

func (w Words) render(options bool) string {
	s := string(w)
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		if strings.HasPrefix(s[i+1:], "{") {
			b.WriteString(s[:i+1])
			s = s[i+2:]
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		j += i
		path, value, given := strings.Cut(s[i+1:j], ": ")
		if !isGoPath(path) {
			// Not a name: a brace of a value, kept as it is.
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		sep := " "
		if options {
			path, sep = OptionPath(path), ": "
		}
		b.WriteString(path)
		if given {
			b.WriteString(sep + value)
		}
		s = s[j+1:]
	}
}

// isGoPath reports whether s is a path of Go field names,
// "Retry.MaxAttempts".
func isGoPath(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" || part[0] < 'A' || part[0] > 'Z' {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// OptionPath turns a Go path of policy fields inside a group or a method
// ("Retry.MaxBackoff", "Breaker.CoolDown") into its path in the options
// ("retry.max_backoff", "circuit_breaker.cool_down"). A struct held by
// value (a Shedding's Limits) has no key of its own: the options write
// its fields in the group ("shedding.low").
func OptionPath(goPath string) string {
	var parts []string
	for _, part := range strings.Split(goPath, ".") {
		if part != "Limits" {
			parts = append(parts, contract.OptionName(part))
		}
	}
	return strings.Join(parts, ".")
}

// words formats a text of Words: format names values between braces, and
// args are values formatted into it, read as written (a string's braces
// doubled).
func words(format string, args ...any) Words {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = strings.ReplaceAll(s, "{", "{{")
		}
	}
	return Words(fmt.Sprintf(format, args...))
}
