package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
)

// losingStore is a Store (not the MemoryStore type, so the Guard calls it
// on a goroutine of its own) whose first Complete finds the entry gone,
// as after a store restarted without it: it releases the entry and
// answers ErrNotOwner. With taker, another request claims the freed key
// before that answer; with panicAgain, the Complete after it panics.
type losingStore struct {
	Store
	taker, panicAgain bool

	mu        sync.Mutex
	completes int
}

func (s *losingStore) Complete(ctx context.Context, key, token string, outcome []byte, ttl time.Duration) error {
	s.mu.Lock()
	s.completes++
	n := s.completes
	s.mu.Unlock()
	switch {
	case n == 1:
		if err := s.Store.Release(ctx, key, token); err != nil {
			return err
		}
		if s.taker {
			if _, err := s.Store.Claim(ctx, key, "another-request", Fingerprint{}, time.Minute); err != nil {
				return err
			}
		}
		return ErrNotOwner
	case s.panicAgain:
		panic("boom in complete")
	}
	return s.Store.Complete(ctx, key, token, outcome, ttl)
}

// TestReviewRekeep attacks the three ways rekeep (an outcome whose entry
// was gone when written) can go, on the memory store behind a Guard that
// calls it as a remote one: the key still free is claimed again and the
// outcome kept, so the caller gets its answer and the repeat the replay
// (one run); a key another request took meanwhile is left to it, the
// caller told UNAVAILABLE (lost its hold), the handler not run again; a
// write that panics after the claim gives the caller its answer, counted
// in NotKept.
func TestReviewRekeep(t *testing.T) {
	t.Run("key free", func(t *testing.T) {
		srv := &inventoryServer{}
		store := &losingStore{Store: NewMemoryStore(100)}
		g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))
		first, err := reserve(t, client, "o-1")
		if err != nil {
			t.Fatalf("the request whose entry was gone at its write: %v, want its answer", err)
		}
		again, err := reserve(t, client, "o-1")
		if err != nil || again.GetReservationId() != first.GetReservationId() {
			t.Errorf("the repeat: %v, %v; want the replay of %v", again, err, first)
		}
		if n := srv.reserveCalls.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if s := stats(t, g); s.Replayed != 1 || s.LeasesLost != 0 || s.NotKept != 0 {
			t.Errorf("stats %+v: want one replay, no lease lost, nothing not kept", s)
		}
	})
	t.Run("key taken", func(t *testing.T) {
		srv := &inventoryServer{}
		store := &losingStore{Store: NewMemoryStore(100), taker: true}
		g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))
		_, err := reserve(t, client, "o-1")
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "idempotency key") {
			t.Errorf("the request whose key another took: %v, want UNAVAILABLE saying it lost the key", err)
		}
		if n := srv.reserveCalls.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if s := stats(t, g); s.LeasesLost != 1 {
			t.Errorf("stats %+v: want the lost lease counted", s)
		}
	})
	t.Run("write panics", func(t *testing.T) {
		srv := &inventoryServer{}
		store := &losingStore{Store: NewMemoryStore(100), panicAgain: true}
		g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))
		if _, err := reserve(t, client, "o-1"); err != nil {
			t.Errorf("the request whose second write panicked: %v, want its answer", err)
		}
		if s := stats(t, g); s.NotKept != 1 || s.StoreErrors == 0 {
			t.Errorf("stats %+v: want the outcome counted not kept and the panic as a store error", s)
		}
		if n := srv.reserveCalls.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
	})
}
