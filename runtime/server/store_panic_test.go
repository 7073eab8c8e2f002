package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// panicStore is a Store (not the MemoryStore type, so the Guard calls it
// on a goroutine of its own, as it does a Redis store) whose operation op
// panics: before doing anything, or, with after, once carried out.
type panicStore struct {
	Store
	mu    sync.Mutex
	op    string
	after bool
}

func (s *panicStore) set(op string, after bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.op, s.after = op, after
}

// check panics if op is the one that panics at this moment (after or not).
func (s *panicStore) check(op string, after bool) {
	s.mu.Lock()
	hit := s.op == op && s.after == after
	s.mu.Unlock()
	if hit {
		panic("boom in " + op)
	}
}

func (s *panicStore) Claim(ctx context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error) {
	s.check("claim", false)
	c, err := s.Store.Claim(ctx, key, token, fp, lease)
	s.check("claim", true)
	return c, err
}

func (s *panicStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	s.check("renew", false)
	err := s.Store.Renew(ctx, key, token, lease)
	s.check("renew", true)
	return err
}

func (s *panicStore) Complete(ctx context.Context, key, token string, outcome []byte, ttl time.Duration) error {
	s.check("complete", false)
	err := s.Store.Complete(ctx, key, token, outcome, ttl)
	s.check("complete", true)
	return err
}

func (s *panicStore) Release(ctx context.Context, key, token string) error {
	s.check("release", false)
	err := s.Store.Release(ctx, key, token)
	s.check("release", true)
	return err
}

// logBuffer is an io.Writer for a slog handler, safe for the Guard's
// goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// panicking serves the inventory behind a Guard on a panicStore, with lease
// and mode for ReserveStock, and a logger writing to the returned buffer.
func panicking(t *testing.T, srv *inventoryServer, lease time.Duration, mode policy.StoreErrorMode) (*Guard, inventoryv1.InventoryServiceClient, *panicStore, *logBuffer) {
	t.Helper()
	p := inventoryPolicy()
	p.Methods[1].Dedup.Lease = lease
	p.Methods[1].Dedup.OnStoreError = mode
	store := &panicStore{Store: NewMemoryStore(100)}
	var log logBuffer
	g, client, _ := guarded(t, srv, []*policy.Server{p}, WithStore(store),
		WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	return g, client, store, &log
}

// loggedPanic checks that the log holds the panic of op, with its stack.
func loggedPanic(t *testing.T, log *logBuffer, op string) {
	t.Helper()
	s := log.String()
	if !strings.Contains(s, "idempotency store panicked") || !strings.Contains(s, "op="+op) ||
		!strings.Contains(s, "boom in "+op) || !strings.Contains(s, "store_panic_test.go") {
		t.Errorf("the log does not hold the panic of %s with its stack:\n%s", op, s)
	}
}

// TestStorePanicInClaim: a Claim that panics does not end the server. The
// claim's outcome is unknown, so the request fails as after a failed
// claim: StoreErrorRefuse answers UNAVAILABLE, naming the panic, without
// running the handler; StoreErrorRunWithoutDedup runs it, as the operator
// chose for a store that fails. A claim carried out before the panic is
// released, so a repeat once the store is mended runs at once.
func TestStorePanicInClaim(t *testing.T) {
	t.Run("refuse", func(t *testing.T) {
		srv := &inventoryServer{}
		g, client, store, log := panicking(t, srv, time.Second, policy.StoreErrorRefuse)
		store.set("claim", true)
		_, err := reserve(t, client, "o-1")
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "the store panicked: boom in claim") {
			t.Errorf("a claim that panicked: %v, want UNAVAILABLE naming the panic", err)
		}
		if n := srv.reserveCalls.Load(); n != 0 {
			t.Errorf("the handler ran %d times after a claim whose outcome is unknown, want 0", n)
		}
		if s := stats(t, g); s.StoreErrors == 0 || s.RanWithoutDedup != 0 {
			t.Errorf("stats %+v: want the store error counted and nothing run without dedup", s)
		}
		loggedPanic(t, log, "claim")
		store.set("", false)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if _, err := client.ReserveStock(withKey(ctx, "o-1"), &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1}); err != nil {
			t.Errorf("the repeat once the store is mended: %v, want it run (the claim carried out before the panic was released)", err)
		}
		if n := srv.reserveCalls.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
	})
	t.Run("run without dedup", func(t *testing.T) {
		srv := &inventoryServer{}
		g, client, store, log := panicking(t, srv, time.Second, policy.StoreErrorRunWithoutDedup)
		store.set("claim", false)
		if _, err := reserve(t, client, "o-1"); err != nil {
			t.Errorf("a claim that panicked, under StoreErrorRunWithoutDedup: %v, want the handler's answer", err)
		}
		if s := stats(t, g); srv.reserveCalls.Load() != 1 || s.RanWithoutDedup != 1 || s.StoreErrors == 0 {
			t.Errorf("handler ran %d times, stats %+v: want 1, run without dedup, the store error counted", srv.reserveCalls.Load(), s)
		}
		loggedPanic(t, log, "claim")
	})
}

// TestStorePanicInRenew: a Renew that panics is a failed renewal: the
// handler goes on, and its outcome is kept if it ends before the lease is
// given up (5/4 Lease); a handler that outlives that loses its lease, its
// context cancelled with ErrLeaseLost, as when the store cannot be reached.
func TestStorePanicInRenew(t *testing.T) {
	const lease = 200 * time.Millisecond // renewed every 50 ms, given up at 250 ms
	t.Run("handler ends in time", func(t *testing.T) {
		srv := &inventoryServer{}
		srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
			time.Sleep(120 * time.Millisecond) // two renewals, both panicking
			return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
		}
		g, client, store, log := panicking(t, srv, lease, policy.StoreErrorRefuse)
		store.set("renew", false)
		resp, err := reserve(t, client, "o-1")
		if err != nil || resp.GetReservationId() != "r-o-1" {
			t.Fatalf("a request whose renewals panicked: %v, %v; want its answer", resp, err)
		}
		if _, err := reserve(t, client, "o-1"); err != nil || srv.reserveCalls.Load() != 1 {
			t.Errorf("the repeat: %v after %d runs, want the replay", err, srv.reserveCalls.Load())
		}
		if s := stats(t, g); s.StoreErrors == 0 || s.LeasesLost != 0 || s.Replayed != 1 {
			t.Errorf("stats %+v: want the renewals' errors counted, no lease lost, one replay", s)
		}
		loggedPanic(t, log, "renew")
	})
	t.Run("handler outlives the lease", func(t *testing.T) {
		srv := &inventoryServer{}
		cause := make(chan error, 1)
		srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
			select {
			case <-ctx.Done():
				cause <- context.Cause(ctx)
				return nil, status.FromContextError(ctx.Err()).Err()
			case <-time.After(2 * time.Second):
				cause <- nil
				return &inventoryv1.ReserveStockResponse{}, nil
			}
		}
		g, client, store, log := panicking(t, srv, lease, policy.StoreErrorRefuse)
		store.set("renew", false)
		start := time.Now()
		_, err := reserve(t, client, "o-1")
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "lost its hold") {
			t.Errorf("a request whose renewals all panicked: %v, want UNAVAILABLE, its lease lost", err)
		}
		if c := <-cause; c != ErrLeaseLost {
			t.Errorf("the handler's context ended with %v, want ErrLeaseLost", c)
		}
		if took := time.Since(start); took > lease+lease/4+time.Second/2 {
			t.Errorf("the lease was given up after %v, want about 5/4 of %v", took, lease)
		}
		if s := stats(t, g); s.LeasesLost != 1 {
			t.Errorf("stats %+v: want one lease lost", s)
		}
		loggedPanic(t, log, "renew")
	})
}

// TestStorePanicInComplete: a Complete that panics after the handler ran
// loses neither the answer nor the key. The caller gets the handler's
// answer at once (the write is not retried for the rest of the lease: a
// panic is a bug, not an outage that ends), counted as NotKept; the key
// stays pending until its entry lapses, so a repeat meanwhile waits rather
// than running the handler a second time. A Complete carried out before it
// panicked kept the outcome, which the repeat replays.
func TestStorePanicInComplete(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(map[bool]string{false: "before writing", true: "after writing"}[after], func(t *testing.T) {
			srv := &inventoryServer{}
			g, client, store, log := panicking(t, srv, 3*time.Second, policy.StoreErrorRefuse)
			store.set("complete", after)
			start := time.Now()
			first, err := reserve(t, client, "o-1")
			if err != nil || first.GetReservationId() != "r-o-1-1" {
				t.Fatalf("a request whose outcome's write panicked: %v, %v; want the handler's answer", first, err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("the answer took %v: the panicking write was retried", took)
			}
			loggedPanic(t, log, "complete")
			store.set("", false)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			again, err := client.ReserveStock(withKey(ctx, "o-1"), &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
			if after {
				if err != nil || again.GetReservationId() != first.GetReservationId() {
					t.Errorf("the repeat after a write carried out: %v, %v; want the replay of %v", again, err, first)
				}
			} else if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("the repeat while the key is pending: %v, %v; want it to wait (DEADLINE_EXCEEDED)", again, err)
			}
			if n := srv.reserveCalls.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
			if s := stats(t, g); s.StoreErrors == 0 || s.NotKept != 1 {
				t.Errorf("stats %+v: want the store error and one outcome not kept", s)
			}
		})
	}
}

// TestStorePanicInRelease: a Release that panics (the handler's failure is
// transient, not kept) leaves the caller the handler's own answer. A
// Release carried out before it panicked freed the key, so the repeat runs
// at once; one that panicked before leaves the key pending until its entry
// lapses, so the repeat waits, as after a failed release.
func TestStorePanicInRelease(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(map[bool]string{false: "before releasing", true: "after releasing"}[after], func(t *testing.T) {
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				return nil, status.Error(codes.Unavailable, "ledger busy")
			}
			g, client, store, log := panicking(t, srv, 3*time.Second, policy.StoreErrorRefuse)
			store.set("release", after)
			_, err := reserve(t, client, "o-1")
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "ledger busy") {
				t.Errorf("a request whose key's release panicked: %v, want the handler's own UNAVAILABLE", err)
			}
			loggedPanic(t, log, "release")
			store.set("", false)
			srv.mu.Lock()
			srv.onReserve = nil
			srv.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err = client.ReserveStock(withKey(ctx, "o-1"), &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
			want, wantCalls := codes.DeadlineExceeded, int64(1)
			if after {
				want, wantCalls = codes.OK, 2
			}
			if status.Code(err) != want || srv.reserveCalls.Load() != wantCalls {
				t.Errorf("the repeat: %v after %d runs, want %v after %d", err, srv.reserveCalls.Load(), want, wantCalls)
			}
			if s := stats(t, g); s.StoreErrors == 0 {
				t.Errorf("stats %+v: want the release's error counted", s)
			}
		})
	}
}

// TestStorePanicInRenewLoggedOncePerLease: a Store whose Renew always
// panics is retried every Lease/16 until the lease is given up, and every
// retry is counted in StoreErrors, but its stack is logged once per
// lease, not once per retry: two requests whose leases are lost that way
// leave two logged panics, each with its stack, and more than ten counted.
func TestStorePanicInRenewLoggedOncePerLease(t *testing.T) {
	const lease = 200 * time.Millisecond // renewed at 50 ms, retried every 12.5 ms, given up at 250 ms
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	g, client, store, log := panicking(t, srv, lease, policy.StoreErrorRefuse)
	store.set("renew", false)
	for i, key := range []string{"o-1", "o-2"} {
		if _, err := reserve(t, client, key); status.Code(err) != codes.Unavailable {
			t.Fatalf("request %d: %v, want UNAVAILABLE, its lease lost", i, err)
		}
		if n := strings.Count(log.String(), "idempotency store panicked"); n != i+1 {
			t.Errorf("after request %d: %d panics logged, want %d (one per lease)", i, n, i+1)
		}
	}
	loggedPanic(t, log, "renew")
	if s := stats(t, g); s.StoreErrors < 10 || s.LeasesLost != 2 {
		t.Errorf("stats %+v: want every panicking renewal counted (more than ten) and two leases lost", s)
	}
}
