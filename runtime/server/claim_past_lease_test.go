package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestClaimAnsweredPastTheLease: a store that answers a claim later than
// the lease (here 150 ms for a lease of MinLease, within StoreTimeout)
// cannot hold the key for the handler, nor one that answers it no faster
// than a renewal is waited for (70 ms: half the lease is 50 ms), which
// would never renew. The Guard counts it as the store's
// failure, releases the key, and OnStoreError decides: under
// StoreErrorRefuse the handler does not run (UNAVAILABLE); under
// StoreErrorRunWithoutDedup it runs, counted in RanWithoutDedup. Either
// way the key is free afterwards: once the store is quick, the same key
// runs.
func TestClaimAnsweredPastTheLease(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		mode  policy.StoreErrorMode
	}{
		{150 * time.Millisecond, policy.StoreErrorRefuse},
		{150 * time.Millisecond, policy.StoreErrorRunWithoutDedup},
		{70 * time.Millisecond, policy.StoreErrorRefuse},
		{70 * time.Millisecond, policy.StoreErrorRunWithoutDedup},
	} {
		mode := tc.mode
		t.Run(tc.delay.String()+"/"+mode.String(), func(t *testing.T) {
			store := &slowClaimStore{Store: NewMemoryStore(100), delay: tc.delay}
			store.slow.Store(true)
			p := inventoryPolicy()
			for i := range p.Methods {
				if p.Methods[i].Name == reserveStock {
					p.Methods[i].Dedup.Lease = policy.MinLease
					p.Methods[i].Dedup.OnStoreError = mode
				}
			}
			var log logBuffer
			g, err := NewGuard([]*policy.Server{p}, WithStore(store), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			if err != nil {
				t.Fatal(err)
			}
			srv := &inventoryServer{}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err = callGuard(g, srv, ctx, "o-1")
			st := stats(t, g)
			if mode == policy.StoreErrorRefuse {
				if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no faster than the 50ms a renewal") {
					t.Errorf("a claim answered past the lease: %v, want UNAVAILABLE saying so", err)
				}
				if n := srv.reserveCalls.Load(); n != 0 {
					t.Errorf("the handler ran %d times, want 0", n)
				}
			} else {
				if err != nil || srv.reserveCalls.Load() != 1 || st.RanWithoutDedup != 1 {
					t.Errorf("a claim answered past the lease: %v, %d runs, RanWithoutDedup %d; want it run once without dedup",
						err, srv.reserveCalls.Load(), st.RanWithoutDedup)
				}
			}
			if st.StoreErrors != 1 {
				t.Errorf("StoreErrors = %d, want 1", st.StoreErrors)
			}
			store.slow.Store(false)
			runs := srv.reserveCalls.Load()
			if err := callGuard(g, srv, ctx, "o-1"); err != nil || srv.reserveCalls.Load() != runs+1 {
				t.Errorf("the key once the store is quick: %v after %d runs, want it run (the slow claim released)", err, srv.reserveCalls.Load()-runs)
			}
		})
	}
}

// TestClaimPastTheLeaseLoggedOncePerEpisode: a store that answers every
// claim later than the lease is failing for as long as it does: three
// requests log its failure once, and never that it answers again (each
// event is reported once, never once per call), though each claim and
// each release of its key was answered.
func TestClaimPastTheLeaseLoggedOncePerEpisode(t *testing.T) {
	store := &slowClaimStore{Store: NewMemoryStore(100), delay: 150 * time.Millisecond}
	store.slow.Store(true)
	p := inventoryPolicy()
	for i := range p.Methods {
		if p.Methods[i].Name == reserveStock {
			p.Methods[i].Dedup.Lease = policy.MinLease
		}
	}
	var log logBuffer
	g, err := NewGuard([]*policy.Server{p}, WithStore(store), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	srv := &inventoryServer{}
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := callGuard(g, srv, ctx, "o-1"); status.Code(err) != codes.Unavailable {
			t.Errorf("a claim answered past the lease: %v, want UNAVAILABLE", err)
		}
		cancel()
	}
	if n := stats(t, g).StoreErrors; n != 3 {
		t.Errorf("StoreErrors = %d, want 3", n)
	}
	failing, again := strings.Count(log.String(), "idempotency store failing"), strings.Count(log.String(), "idempotency store answering again")
	if failing != 1 || again != 0 {
		t.Errorf("logged the store failing %d times and answering again %d times over three claims past the lease, want 1 and 0:\n%s", failing, again, log.String())
	}
}

// TestWaiterClaimAnsweredPastTheLease: a repeat waits for the request
// running with its key; that request fails transiently, freeing the key,
// and the store answers the waiter's claim of it in 150 ms, past the
// lease (MinLease). The waiter cannot hold the key at that speed and,
// having seen the key run, never runs without dedup: under both
// OnStoreError modes it answers UNAVAILABLE, saying that the store became
// too slow to take the key over, without running the handler; the
// failure is counted and logged once, and the key is free afterwards.
func TestWaiterClaimAnsweredPastTheLease(t *testing.T) {
	for _, mode := range []policy.StoreErrorMode{policy.StoreErrorRefuse, policy.StoreErrorRunWithoutDedup} {
		t.Run(mode.String(), func(t *testing.T) {
			store := &slowClaimStore{Store: NewMemoryStore(100), delay: 150 * time.Millisecond}
			p := inventoryPolicy()
			for i := range p.Methods {
				if p.Methods[i].Name == reserveStock {
					p.Methods[i].Dedup.Lease = policy.MinLease
					p.Methods[i].Dedup.OnStoreError = mode
				}
			}
			var log logBuffer
			g, err := NewGuard([]*policy.Server{p}, WithStore(store), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			if err != nil {
				t.Fatal(err)
			}
			running, release := make(chan struct{}), make(chan struct{})
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				close(running)
				<-release
				return nil, status.Error(codes.Unavailable, "a transient failure: the key is freed")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			first := make(chan error, 1)
			go func() { first <- callGuard(g, srv, ctx, "o-1") }()
			<-running
			waiter := make(chan error, 1)
			go func() { waiter <- callGuard(g, srv, ctx, "o-1") }()
			eventually(t, "the repeat waiting", func() bool { return stats(t, g).Waited == 1 })
			store.slow.Store(true)
			close(release)
			if err := <-first; status.Code(err) != codes.Unavailable {
				t.Errorf("the first request: %v, want its handler's UNAVAILABLE", err)
			}
			err = <-waiter
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "too slow to take the key over") {
				t.Errorf("the waiter whose claim was answered past the lease: %v, want UNAVAILABLE saying the store became too slow to take the key over", err)
			}
			st := stats(t, g)
			if n := srv.reserveCalls.Load(); n != 1 || st.RanWithoutDedup != 0 {
				t.Errorf("the handler ran %d times (RanWithoutDedup %d), want once, by the first request", n, st.RanWithoutDedup)
			}
			if st.StoreErrors != 1 || st.LeasesLost != 0 {
				t.Errorf("StoreErrors %d, LeasesLost %d; want the late claim counted once and no lease lost", st.StoreErrors, st.LeasesLost)
			}
			if failing, again := strings.Count(log.String(), "idempotency store failing"), strings.Count(log.String(), "idempotency store answering again"); failing != 1 || again != 0 {
				t.Errorf("logged the store failing %d times and answering again %d times, want 1 and 0 (the late claim's release ends no episode):\n%s", failing, again, log.String())
			}
			store.slow.Store(false)
			srv.mu.Lock()
			srv.onReserve = nil
			srv.mu.Unlock()
			if err := callGuard(g, srv, ctx, "o-1"); err != nil || srv.reserveCalls.Load() != 2 {
				t.Errorf("the key once the store is quick: %v after %d runs, want it run (the waiter's late claim released)", err, srv.reserveCalls.Load())
			}
		})
	}
}
