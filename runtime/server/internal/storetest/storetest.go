// Package storetest holds the tests every server.Store must pass, run by
// the MemoryStore's tests and redisstore's.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/server"
)

// RetriedOperations: a Claim or Complete carried out whose answer was lost,
// then retried, gets the answer of the first; the same token with another
// body, or another outcome, does not.
func RetriedOperations(t *testing.T, s server.Store) {
	t.Helper()
	ctx := context.Background()
	fp := server.Fingerprint{7}
	for i := range 2 {
		if c, err := s.Claim(ctx, "k", "tok", fp, time.Minute); err != nil || c.State != server.Claimed {
			t.Fatalf("claim %d by the owner: %+v %v, want Claimed", i, c, err)
		}
	}
	if c, _ := s.Claim(ctx, "k", "other", fp, time.Minute); c.State != server.Pending || c.Token != "tok" {
		t.Errorf("claim by another token: %+v, want Pending with the owner's token", c)
	}
	if c, _ := s.Claim(ctx, "k", "tok", server.Fingerprint{8}, time.Minute); c.State != server.Pending {
		t.Errorf("claim by the owner's token with another body: %+v, want Pending", c)
	}
	for i := range 2 {
		if err := s.Complete(ctx, "k", "tok", []byte("out"), time.Minute); err != nil {
			t.Errorf("complete %d: %v, want nil", i, err)
		}
	}
	if err := s.Complete(ctx, "k", "tok", []byte("other"), time.Minute); !errors.Is(err, server.ErrNotOwner) {
		t.Errorf("complete with another outcome: %v, want ErrNotOwner", err)
	}
	if c, _ := s.Claim(ctx, "k", "tok", fp, time.Minute); c.State != server.Done || string(c.Outcome) != "out" {
		t.Errorf("claim of the done key by its former owner: %+v, want Done", c)
	}
}
