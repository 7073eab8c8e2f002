// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/go-resilient/resilient/runtime"
)

// JoinKey allocates the key once, whatever the
// lengths of its parts (across each count of digits), and each part is
// its length, ":", then itself.
func TestJoinKeyAllocatesOnce(t *testing.T) {
	var parts []string
	var want strings.Builder
	for _, n := range []int{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 12345} {
		p := strings.Repeat("x", n)
		parts = append(parts, p)
		want.WriteString(strconv.Itoa(n) + ":" + p)
	}
	for i := range parts {
		got := runtime.JoinKey(parts[:i+1]...)
		if w := runtime.JoinKey(parts[:i+1]...); got != w {
			t.Fatal("JoinKey is not deterministic")
		}
		prefix := want.String()
		if !strings.HasPrefix(prefix, got) || (i == len(parts)-1 && got != prefix) {
			t.Fatalf("JoinKey of %d parts: %.40q…, want a prefix of %.40q…", i+1, got, prefix)
		}
		if allocs := testing.AllocsPerRun(100, func() { _ = runtime.JoinKey(parts[:i+1]...) }); allocs != 1 {
			t.Errorf("JoinKey of %d parts (the last %d bytes): %v allocations, want 1", i+1, len(parts[i]), allocs)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = runtime.JoinKey("", "") }); allocs != 1 {
		t.Errorf("JoinKey of two empty parts: %v allocations, want 1", allocs)
	}
}
