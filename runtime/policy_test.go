package runtime

import (
	"testing"

	"google.golang.org/grpc/codes"
)

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
