package runtime

import (
	"testing"

	"google.golang.org/grpc/codes"
)

func TestCodeNamesRoundTrip(t *testing.T) {
	// The canonical names of the gRPC status codes, as in the .proto
	// annotations and gRPC service config.
	want := []string{
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
		"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
		"UNAUTHENTICATED",
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		name := CodeName(c)
		if name != want[c] {
			t.Errorf("CodeName(%d) = %q, want %q", c, name, want[c])
		}
		got, ok := ParseCode(want[c])
		if !ok || got != c {
			t.Errorf("ParseCode(%q) = (%v, %v), want (%v, true)", want[c], got, ok, c)
		}
		// And it agrees with grpc-go's own JSON names.
		var j codes.Code
		if err := j.UnmarshalJSON([]byte(`"` + want[c] + `"`)); err != nil || j != c {
			t.Errorf("grpc-go reads %q as (%v, %v), want %v", want[c], j, err, c)
		}
	}
	if got := CodeName(17); got != "CODE(17)" {
		t.Errorf("CodeName(17) = %q, want CODE(17)", got)
	}
}

func TestParseCodeRefusesUnknownNames(t *testing.T) {
	for _, name := range []string{"", "unavailable", "Unavailable", "UNAVAILABLE ", "NOT FOUND", "O_K", "CODE(17)", "17", "14", "TIMEOUT"} {
		if c, ok := ParseCode(name); ok {
			t.Errorf("ParseCode(%q) = %v, want refusal", name, c)
		}
	}
}

func TestCodeSet(t *testing.T) {
	s := CodesOf(codes.Unavailable, codes.DeadlineExceeded, codes.Unavailable)
	for c := codes.Code(0); c < 40; c++ {
		want := c == codes.Unavailable || c == codes.DeadlineExceeded
		if s.Has(c) != want {
			t.Errorf("Has(%v) = %v, want %v", c, s.Has(c), want)
		}
	}
	if got := s.String(); got != "[DEADLINE_EXCEEDED UNAVAILABLE]" {
		t.Errorf("String = %q", got)
	}
	if got := CodesOf().String(); got != "[]" {
		t.Errorf("empty String = %q, want []", got)
	}
	if CodesOf() != 0 {
		t.Error("CodesOf() is not empty")
	}
	// Codes that do not fit the set are dropped, never wrapped onto others.
	if got := CodesOf(32, 33, 100, 1<<31); got != 0 {
		t.Errorf("CodesOf(out of range) = %b, want 0", got)
	}
	if CodesOf(codes.OK) != 1 || !CodesOf(codes.OK).Has(codes.OK) {
		t.Error("OK is not bit 0")
	}
	all := CodesOf()
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		all |= CodesOf(c)
	}
	if got := all.String(); got != "[OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS PERMISSION_DENIED RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED]" {
		t.Errorf("all codes: %s", got)
	}
	if got := CodesOf(20).String(); got != "[CODE(20)]" {
		t.Errorf("CodesOf(20).String() = %q", got)
	}
}
