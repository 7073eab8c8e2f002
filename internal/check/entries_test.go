// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"slices"
	"testing"

	"github.com/go-resilient/resilient/internal/check"
)

// TestEntriesPairsByNameAndNamesEveryMisfit: entries reordered are paired
// with their own method; a method removed, one listed twice and an entry
// that is no method are each reported once, by name, and none of them is
// paired with another method's entry.
func TestEntriesPairsByNameAndNamesEveryMisfit(t *testing.T) {
	type m struct{ name, v string }
	annotated := []m{{"/p.S/A", "a"}, {"/p.S/B", "b"}, {"/p.S/C", "c"}, {"/p.S/D", "d"}}
	edited := []m{{"/p.S/D", "d"}, {"/p.S/A", "a"}, {"/p.S/C", "c1"}, {"/p.S/C", "c2"}, {"/p.S/X", "x"}, {"/p.S/X", "x"}}
	var paired, bad []string
	check.Entries("p.S", annotated, edited, func(e *m) string { return e.name },
		func(want, got *m) {
			if want.name != got.name {
				t.Errorf("%s paired with %s's entry", want.name, got.name)
			}
			paired = append(paired, want.name+"="+got.v)
		}, func(method, why string) { bad = append(bad, method+": "+why) })
	if want := []string{"/p.S/A=a", "/p.S/D=d"}; !slices.Equal(paired, want) {
		t.Errorf("paired %q, want %q", paired, want)
	}
	want := []string{
		"/p.S/B: its entry was removed or renamed: keep one entry per method of the service, and change its fields instead",
		"/p.S/C: has 2 entries: keep exactly one",
		"/p.S/X: is not a method of the service (a renamed entry?): the policy's entries are its methods, named /p.S/Method",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("reported\n%q\nwant\n%q", bad, want)
	}
}
