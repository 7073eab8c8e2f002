// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package codename

import (
	"testing"

	"google.golang.org/grpc/codes"
)

// Every code round-trips through its name, and the names are the
// canonical ones, not Go's.
func TestNames(t *testing.T) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		got, ok := Parse(Of(c))
		if !ok || got != c {
			t.Errorf("Parse(Of(%d)) = %v, %v; want %v", c, got, ok, c)
		}
	}
	for c, want := range map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.Unavailable: "UNAVAILABLE", 17: "CODE(17)",
	} {
		if got := Of(c); got != want {
			t.Errorf("Of(%d) = %q, want %q", c, got, want)
		}
	}
	for _, bad := range []string{"", "unavailable", "CANCELED", "Unavailable", "CODE(17)", "UNAVAILABLE "} {
		if c, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) = %v, true; want false", bad, c)
		}
	}
}
