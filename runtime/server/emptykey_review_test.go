package server

import (
	"testing"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestReviewEmptyKeyIsNoKey: the README's "a request with an empty key is
// not deduplicated": three requests with one empty idempotency-key value
// each run the handler, and none is replayed or waits (a "" key kept
// would replay the first request's answer to every request sent with an
// empty key).
func TestReviewEmptyKeyIsNoKey(t *testing.T) {
	srv := &inventoryServer{}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for i := range 3 {
		if _, err := reserve(t, client, ""); err != nil {
			t.Fatalf("request %d with an empty key: %v, want the handler's answer", i, err)
		}
	}
	if n := srv.reserveCalls.Load(); n != 3 {
		t.Errorf("the handler ran %d times for three requests with an empty key, want 3", n)
	}
	if s := stats(t, g); s.Replayed != 0 || s.Waited != 0 || s.Mismatched != 0 {
		t.Errorf("stats %+v: want nothing replayed, waited for or mismatched", s)
	}
}
