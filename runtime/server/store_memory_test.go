package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	s := NewMemoryStore(3)
	s.now = func() time.Time { return now }

	claim := func(key, token string) ClaimState {
		t.Helper()
		c, err := s.Claim(ctx, key, token, Fingerprint{1}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c.State
	}
	if claim("a", "t1") != Claimed || claim("a", "t2") != Pending {
		t.Fatal("second claim of a pending key was not Pending")
	}
	if err := s.Complete(ctx, "a", "t2", []byte("x"), time.Minute); !errors.Is(err, ErrNotOwner) {
		t.Errorf("a non-owner completed: %v", err)
	}
	if err := s.Complete(ctx, "a", "t1", []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Claim(ctx, "a", "t3", Fingerprint{2}, time.Second); c.State != Done || string(c.Outcome) != "x" || c.Fingerprint != (Fingerprint{1}) {
		t.Errorf("claim of a done key: %+v", c)
	}
	// Release frees only the owner's pending key.
	claim("b", "tb")
	_ = s.Release(ctx, "b", "other")
	if claim("b", "x") != Pending {
		t.Error("a non-owner released the key")
	}
	_ = s.Release(ctx, "b", "tb")
	if claim("b", "tb2") != Claimed {
		t.Error("released key not free")
	}
	// Full (a done, b and c pending): the done entry is dropped first.
	claim("c", "tc")
	if claim("d", "td") != Claimed || s.Len() != 3 {
		t.Fatalf("claim when full: len %d", s.Len())
	}
	// b, c and d are pending: no room, and pending entries are never dropped.
	if _, err := s.Claim(ctx, "e", "te", Fingerprint{}, time.Second); !errors.Is(err, ErrStoreFull) {
		t.Errorf("claim with every entry pending: %v, want ErrStoreFull", err)
	}
	// Leases lapse: expired entries make room and can be claimed again.
	now = now.Add(2 * time.Second)
	if err := s.Renew(ctx, "c", "tc", time.Second); !errors.Is(err, ErrNotOwner) {
		t.Errorf("renew after the lease ended: %v", err)
	}
	if claim("e", "te") != Claimed || claim("c", "tc2") != Claimed || claim("a", "ta") != Claimed {
		t.Error("expired entries not replaced")
	}
	if err := s.Renew(ctx, "e", "te", time.Second); err != nil {
		t.Error(err)
	}
}
