// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import "fmt"

// Entries pairs the method entries of an edited policy (a WithPolicy edit,
// an override) with the annotated methods of service, by name, as the
// client and the Guard bind them: an edit may reorder the entries, never
// drop, rename or repeat one. pair is called for each annotated method
// that kept exactly one entry; bad(method, why) for each that did not, and
// once for each name of an entry that is no method of the service.
func Entries[M any](service string, annotated, edited []M, name func(*M) string,
	pair func(want, got *M), bad func(method, why string)) {
	entries := make(map[string][]*M, len(edited))
	for i := range edited {
		entries[name(&edited[i])] = append(entries[name(&edited[i])], &edited[i])
	}
	known := make(map[string]bool, len(annotated))
	for i := range annotated {
		want := &annotated[i]
		known[name(want)] = true
		switch got := entries[name(want)]; len(got) {
		case 0:
			bad(name(want), "its entry was removed or renamed: keep one entry per method of the service, "+
				"and change its fields instead")
		case 1:
			pair(want, got[0])
		default:
			bad(name(want), fmt.Sprintf("has %d entries: keep exactly one", len(got)))
		}
	}
	for i := range edited {
		if n := name(&edited[i]); !known[n] {
			bad(n, fmt.Sprintf("is not a method of the service (a renamed entry?): the policy's entries are "+
				"its methods, named /%s/Method", service))
			known[n] = true // once
		}
	}
}
