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

func TestNamesRoundTrip(t *testing.T) {
	// The canonical names of the gRPC status codes, as in the .proto
	// annotations and gRPC service config.
	want := []string{
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
		"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
		"UNAUTHENTICATED",
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		name := Of(c)
		if name != want[c] {
			t.Errorf("Of(%d) = %q, want %q", c, name, want[c])
		}
		got, ok := Parse(want[c])
		if !ok || got != c {
			t.Errorf("Parse(%q) = (%v, %v), want (%v, true)", want[c], got, ok, c)
		}
		// And it agrees with grpc-go's own JSON names.
		var j codes.Code
		if err := j.UnmarshalJSON([]byte(`"` + want[c] + `"`)); err != nil || j != c {
			t.Errorf("grpc-go reads %q as (%v, %v), want %v", want[c], j, err, c)
		}
	}
	if got := Of(17); got != "CODE(17)" {
		t.Errorf("Of(17) = %q, want CODE(17)", got)
	}
}

func TestParseRefusesUnknownNames(t *testing.T) {
	for _, name := range []string{"", "unavailable", "Unavailable", "UNAVAILABLE ", "NOT FOUND", "O_K", "CODE(17)", "17", "14", "TIMEOUT"} {
		if c, ok := Parse(name); ok {
			t.Errorf("Parse(%q) = %v, want refusal", name, c)
		}
	}
}
