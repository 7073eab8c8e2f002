package server

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// slowClaimStore is a MemoryStore behind a Claim that, while slow is set,
// answers only once its context ends or after delay, whichever is first:
// with a delay longer than StoreTimeout, a store that blocks until its
// context ends. With gate set, a slow claim answers when the test sends
// on gate instead of after delay: after an event the test waits for (the
// request's end), however late a loaded machine makes that event, rather
// than after a fixed time the event may overrun. It is not the
// MemoryStore type, so the Guard calls it on a goroutine of its own.
type slowClaimStore struct {
	Store
	slow      atomic.Bool
	delay     time.Duration
	gate      chan struct{} // if not nil, a slow claim waits for a send on it, not for delay
	ignoreCtx bool          // answer after delay whatever the context (go-redis without ContextTimeoutEnabled)
	answers   atomic.Int64  // slow claims answered
}

func (s *slowClaimStore) Claim(ctx context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error) {
	if s.slow.Load() {
		defer s.answers.Add(1)
		done := ctx.Done()
		if s.ignoreCtx {
			done = nil
		}
		var after <-chan time.Time
		if s.gate == nil {
			after = time.After(s.delay)
		}
		select {
		case <-done:
			return Claim{}, ctx.Err()
		case <-after:
		case <-s.gate:
		}
	}
	return s.Store.Claim(ctx, key, token, fp, lease)
}

// open lets one slow claim waiting on the gate answer; it fails the test
// if none comes to the gate within a second.
func (s *slowClaimStore) open(t *testing.T) {
	t.Helper()
	select {
	case s.gate <- struct{}{}:
	case <-time.After(time.Second):
		t.Fatal("no claim reached the store's gate within 1s")
	}
}

// callGuard calls the Guard's unary interceptor for ReserveStock with key,
// as gRPC would, with ctx's deadline: the Guard's own answer, not the one
// the caller's deadline makes on the client side.
func callGuard(g *Guard, srv *inventoryServer, ctx context.Context, key string) error {
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(runtime.IdempotencyKeyHeader, key))
	req := &inventoryv1.ReserveStockRequest{OrderId: key, Sku: "a", Units: 1}
	_, err := g.UnaryInterceptor(ctx, req, &grpc.UnaryServerInfo{FullMethod: reserveStock}, func(ctx context.Context, req any) (any, error) {
		return srv.ReserveStock(ctx, req.(*inventoryv1.ReserveStockRequest))
	})
	return err
}

func slowClaimGuard(t *testing.T, delay time.Duration) (*Guard, *slowClaimStore, *logBuffer) {
	t.Helper()
	store := &slowClaimStore{Store: NewMemoryStore(100), delay: delay}
	store.slow.Store(true)
	var log logBuffer
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	return g, store, &log
}

// TestClaimCutByTheRequestsDeadline: a request with 100 ms left, less
// than StoreTimeout, meets a store whose claim answers only once its
// context ends. Under StoreErrorRefuse the request waits for the store up
// to its own deadline (not a quarter of it) and then answers
// DEADLINE_EXCEEDED, not UNAVAILABLE: its end is not the store's failure,
// and counts as none (Stats.StoreErrors, the log). The handler does not
// run. The store itself is judged by its own bound: silent for the whole
// of StoreTimeout, it is counted then, once.
func TestClaimCutByTheRequestsDeadline(t *testing.T) {
	srv := &inventoryServer{}
	g, _, log := slowClaimGuard(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := callGuard(g, srv, ctx, "o-1")
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "the request ended before the idempotency store answered") {
		t.Errorf("a claim cut by the request's deadline: %v, want DEADLINE_EXCEEDED saying the request ended first", err)
	}
	if took < 90*time.Millisecond || took > StoreTimeout {
		t.Errorf("answered after %v, want at the request's deadline (100 ms), before StoreTimeout", took)
	}
	if s := stats(t, g); s.StoreErrors != 0 || srv.reserveCalls.Load() != 0 {
		t.Errorf("stats %+v, handler ran %d times: want no store error counted for the request's end, and no run", s, srv.reserveCalls.Load())
	}
	if strings.Contains(log.String(), "store failing") {
		t.Errorf("the request's end was logged as the store's failure:\n%s", log)
	}
	// The claim, still running, ends at StoreTimeout: a store silent for
	// all of it is failing, whoever waited.
	// Counted, then logged: both are waited for.
	eventually(t, "the silent claim counted and logged once StoreTimeout passed", func() bool {
		return stats(t, g).StoreErrors == 1 && strings.Contains(log.String(), "store failing")
	})
	if time.Since(start) < StoreTimeout {
		t.Errorf("the claim was counted as failed %v after it was sent, before StoreTimeout", time.Since(start))
	}
}

// TestClaimSlowerThanTheRequest: a store that answers after the request's
// deadline (50 ms), within StoreTimeout, is slow for that request, not
// failing: the request answers DEADLINE_EXCEEDED, nothing is counted,
// even once the answer came, and the claim it carried out is released,
// so the same key with time enough runs at once. A caller that cancels
// gets CANCELLED, likewise not counted. The store answers as soon as the
// request has ended, not after a fixed 150 ms: so that its answer comes
// after the request's end however a loaded machine stretches that, and
// within StoreTimeout of the claim with all the rest of it (450 ms) left
// to the scheduler (a 150 ms delay was measured at 655 ms at load 8).
func TestClaimSlowerThanTheRequest(t *testing.T) {
	srv := &inventoryServer{}
	g, store, log := slowClaimGuard(t, time.Hour)
	store.gate = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := callGuard(g, srv, ctx, "o-1"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a claim slower than the request's 50 ms: %v, want DEADLINE_EXCEEDED", err)
	}
	store.open(t)
	eventually(t, "the slow claim answered", func() bool { return store.answers.Load() == 1 })

	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, ccancel)
	if err := callGuard(g, srv, cctx, "o-2"); status.Code(err) != codes.Canceled {
		t.Errorf("a claim whose caller cancelled: %v, want CANCELLED", err)
	}
	store.open(t)
	eventually(t, "the second slow claim answered", func() bool { return store.answers.Load() == 2 })

	store.slow.Store(false)
	// The late answers were Claimed, and released: the keys are free.
	for _, key := range []string{"o-1", "o-2"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := callGuard(g, srv, ctx, key)
		cancel()
		if err != nil {
			t.Errorf("%s once the store is quick: %v, want it run at once (its late claim released)", key, err)
		}
	}
	if n := srv.reserveCalls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2 (once per key, after the store was quick)", n)
	}
	if s := stats(t, g); s.StoreErrors != 0 {
		t.Errorf("stats %+v: want no store error, the store answered within StoreTimeout", s)
	}
	if strings.Contains(log.String(), "store failing") {
		t.Errorf("a store slower than the request was logged as failing:\n%s", log)
	}
}

// TestClaimAnsweredPastStoreTimeout: a store that ignores its context
// answers a claim 600 ms after it was sent, past StoreTimeout, for a
// request that ended at 50 ms. The answer comes too late to be in time:
// it is counted as the store's failure, and the key it claimed released.
func TestClaimAnsweredPastStoreTimeout(t *testing.T) {
	srv := &inventoryServer{}
	g, store, _ := slowClaimGuard(t, 600*time.Millisecond)
	store.ignoreCtx = true
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := callGuard(g, srv, ctx, "o-1"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a claim slower than the request: %v, want DEADLINE_EXCEEDED", err)
	}
	eventually(t, "the late claim answered", func() bool { return store.answers.Load() == 1 })
	eventually(t, "the answer past StoreTimeout counted", func() bool { return stats(t, g).StoreErrors == 1 })
	store.slow.Store(false)
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := callGuard(g, srv, ctx, "o-1"); err != nil || srv.reserveCalls.Load() != 1 {
		t.Errorf("the key once the store is quick: %v after %d runs, want it run (the late claim released)", err, srv.reserveCalls.Load())
	}
}
