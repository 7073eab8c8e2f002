// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import "strings"

// words is a text of a problem that names values (its mend, its subject,
// what leaving a value out stands for), written once for both of its
// readers: a Go author, who writes the policy's fields (Validate,
// runtime.NewClient, server.NewGuard), and an operator, who writes the
// options' names (the override loader). A value is written between
// braces as its Go path from the group or the method the problem is
// about, "{StaleTTL}", "{Retry.MaxAttempts}", and one given a value puts
// it after a colon, "{Retry.MaxAttempts: 1}". The Go form drops the
// braces ("Retry.MaxAttempts 1"); the options form names each part of
// the path as the options do ("retry.max_attempts: 1"). Text outside the
// braces is the same in both, so a value formatted into words (a count,
// a duration) must hold no brace.
type words string

// goForm is w as a Go author reads it.
func (w words) goForm() string { return w.render(false) }

// options is w as an operator reads it, in the options' names.
func (w words) options() string { return w.render(true) }

func (w words) render(options bool) string {
	s := string(w)
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		j := strings.IndexByte(s, '}')
		if i < 0 || j < i {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		path, value, given := strings.Cut(s[i+1:j], ": ")
		sep := " "
		if options {
			path, sep = optionKey(path), ": "
		}
		b.WriteString(path)
		if given {
			b.WriteString(sep + value)
		}
		s = s[j+1:]
	}
}
