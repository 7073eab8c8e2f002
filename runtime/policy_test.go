package runtime

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

func TestCodeSet(t *testing.T) {
	s := policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded, codes.Unavailable)
	for c := codes.Code(0); c < 40; c++ {
		want := c == codes.Unavailable || c == codes.DeadlineExceeded
		if s.Has(c) != want {
			t.Errorf("Has(%v) = %v, want %v", c, s.Has(c), want)
		}
	}
	if got := s.String(); got != "[DEADLINE_EXCEEDED UNAVAILABLE]" {
		t.Errorf("String = %q", got)
	}
	if got := policy.CodesOf().String(); got != "[]" {
		t.Errorf("empty String = %q, want []", got)
	}
	if policy.CodesOf() != 0 {
		t.Error("policy.CodesOf() is not empty")
	}
	// Codes that do not fit the set are dropped, never wrapped onto others.
	if got := policy.CodesOf(32, 33, 100, 1<<31); got != 0 {
		t.Errorf("policy.CodesOf(out of range) = %b, want 0", got)
	}
	if policy.CodesOf(codes.OK) != 1 || !policy.CodesOf(codes.OK).Has(codes.OK) {
		t.Error("OK is not bit 0")
	}
	all := policy.CodesOf()
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		all |= policy.CodesOf(c)
	}
	if got := all.String(); got != "[OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS PERMISSION_DENIED RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED]" {
		t.Errorf("all codes: %s", got)
	}
	if got := policy.CodesOf(20).String(); got != "[CODE(20)]" {
		t.Errorf("policy.CodesOf(20).String() = %q", got)
	}
}
