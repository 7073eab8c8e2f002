package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// recoverUnary answers a handler's panic with INTERNAL, as a recovery
// interceptor outside the Guard does.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "recovered: %v", r)
		}
	}()
	return h(ctx, req)
}

// keys lists what Redis at addr holds under prefix.
func keys(t *testing.T, addr, prefix string) []string {
	t.Helper()
	ks, err := client(t, addr).Keys(context.Background(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestAttackPanicBehindSlowRedis: every Redis reply is held 40 ms (slow,
// not refusing); the first request with a key panics while a repeat waits
// for it. The panicking request frees its key in Redis: the waiter takes
// it over within a second, not at the end of the 2 s lease, and runs; its
// answer is kept and replayed; no lease counts as lost, and no place stays
// held.
func TestAttackPanicBehindSlowRedis(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	p.DelayReplies(40 * time.Millisecond)
	started := make(chan struct{})
	var panicked atomic.Int64
	srv := &reserver{answer: "r", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		select {
		case <-started: // the take-over
			return nil
		default:
		}
		close(started)
		time.Sleep(150 * time.Millisecond)
		panicked.Store(time.Now().UnixNano())
		panic("reserve boom")
	}}
	g, c := guardedBehind(t, srv, reserveStockPolicy(2*time.Second, policy.StoreErrorRefuse),
		[]grpc.UnaryServerInterceptor{recoverUnary}, server.WithStore(New(client(t, p.Addr()), "panic:")))
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, c, "p-1", 3*time.Second)
		first <- err
	}()
	<-started
	resp, err := reserve(t, c, "p-1", 5*time.Second)
	if err != nil || resp.GetReservationId() != "r-2" {
		t.Errorf("waiter of the request that panicked: %q %v, want it to take over and answer r-2", resp.GetReservationId(), err)
	} else if d := time.Since(time.Unix(0, panicked.Load())); d > time.Second {
		t.Errorf("the waiter answered %s after the panic, want within a second (the key freed, not lapsed)", d)
	}
	if err := <-first; status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "reserve boom") {
		t.Errorf("the panicking request: %v, want the recovered INTERNAL", err)
	}
	again, err := reserve(t, c, "p-1", 3*time.Second)
	if err != nil || again.GetReservationId() != "r-2" {
		t.Errorf("later repeat: %q %v, want the kept r-2", again.GetReservationId(), err)
	}
	if srv.runs.Load() != 2 || srv.commits.Load() != 1 {
		t.Errorf("runs %d, commits %d; want 2 and 1 (the panic, the take-over)", srv.runs.Load(), srv.commits.Load())
	}
	if s := stats(t, g); s.InFlight != 0 || s.Waited != 1 || s.Replayed != 1 || s.LeasesLost != 0 || s.StoreErrors != 0 {
		t.Errorf("stats %+v: want no place held, one wait, one replay, no lease lost, no store error", s)
	}
	if ks := keys(t, r.addr, "panic:"); len(ks) != 1 {
		t.Errorf("Redis holds %q, want the one kept outcome", ks)
	}
}

// TestAttackCallerGoneDuringSlowClaim: Redis answers each reply 300 ms
// late, and the caller cancels 50 ms into its claim. The caller gets
// CANCELLED at once, the handler never runs, and the claim Redis carried
// out late is released by the Guard, not left pending for a Lease: once
// Redis is fast, a repeat runs at once, once.
func TestAttackCallerGoneDuringSlowClaim(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	srv := &reserver{answer: "r"}
	g, c := guarded(t, srv, reserveStockPolicy(3*time.Second, policy.StoreErrorRefuse), server.WithStore(New(client(t, p.Addr()), "gone:")))
	if _, err := reserve(t, c, "warm", time.Second); err != nil {
		t.Fatal(err)
	}
	p.DelayReplies(300 * time.Millisecond)
	ctx, cancel := context.WithCancel(metadataWithKey(context.Background(), "g-1"))
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "g-1", Sku: "a", Units: 1})
	if status.Code(err) != codes.Canceled || time.Since(start) > 250*time.Millisecond {
		t.Errorf("caller cancelled during a slow claim: %v after %s, want CANCELLED at once", err, time.Since(start))
	}
	eventually(t, "Redis carried the late claim out and the Guard released it", func() bool {
		// One entry, the warm-up's; g-1's pending entry is gone.
		return len(keys(t, r.addr, "gone:")) == 1
	})
	p.DelayReplies(0)
	start = time.Now()
	if _, err := reserve(t, c, "g-1", time.Second); err != nil || time.Since(start) > 500*time.Millisecond {
		t.Errorf("repeat once Redis is fast: %v after %s, want an answer at once (no pending entry to wait for)", err, time.Since(start))
	}
	if n := srv.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (the warm-up, the repeat)", n)
	}
	if s := stats(t, g); s.InFlight != 0 || s.Waited != 0 {
		t.Errorf("stats %+v: want no place held and no wait", s)
	}
}

// TestAttackKeyWithNoValue: an idempotency header sent with an empty value
// is no key: each request runs, and nothing is written to Redis.
func TestAttackKeyWithNoValue(t *testing.T) {
	r := startRedis(t)
	srv := &reserver{answer: "r"}
	g, c := guarded(t, srv, reserveStockPolicy(time.Second, policy.StoreErrorRefuse), server.WithStore(New(client(t, r.addr), "empty:")))
	for i := range 3 {
		resp, err := reserve(t, c, "", time.Second)
		if want := fmt.Sprintf("r-%d", i+1); err != nil || resp.GetReservationId() != want {
			t.Errorf("request %d with an empty key: %q %v, want %s (run, not replayed)", i, resp.GetReservationId(), err, want)
		}
	}
	if ks := keys(t, r.addr, "empty:"); len(ks) != 0 {
		t.Errorf("Redis holds %q for an empty key, want nothing", ks)
	}
	if s := stats(t, g); s.Replayed != 0 || s.StoreErrors != 0 {
		t.Errorf("stats %+v: want no replay and no store error", s)
	}
}

// TestAttackSlowRedisWhileHandlerRuns: every Redis reply is held 50 ms
// (a quarter of the renewal's bound of Lease/2, for a 400 ms lease) while a handler
// runs for three leases, and a repeat on another replica waits for it.
// Slow renewals are renewals: no lease is lost, no store error counted,
// the handler runs once and both callers get its answer.
func TestAttackSlowRedisWhileHandlerRuns(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	started := make(chan struct{})
	a := &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		close(started)
		select {
		case <-time.After(1200 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return status.FromContextError(context.Cause(ctx)).Err()
		}
	}}
	b := &reserver{answer: "b"}
	sa, sb := New(client(t, p.Addr()), "slowrun:"), New(client(t, p.Addr()), "slowrun:")
	ga, ca := guarded(t, a, reserveStockPolicy(400*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(sa))
	gb, cb := guarded(t, b, reserveStockPolicy(400*time.Millisecond, policy.StoreErrorRefuse), server.WithStore(sb))
	loadScripts(t, sa)
	p.DelayReplies(50 * time.Millisecond)
	first := make(chan *inventoryv1.ReserveStockResponse, 1)
	go func() {
		resp, err := reserve(t, ca, "s-1", 5*time.Second)
		if err != nil {
			t.Errorf("the running request: %v", err)
		}
		first <- resp
	}()
	<-started
	resp, err := reserve(t, cb, "s-1", 5*time.Second)
	want := <-first
	if err != nil || resp.GetReservationId() != want.GetReservationId() || want.GetReservationId() != "a-1" {
		t.Errorf("the waiter on the other replica: %q %v; the first %q; want both a-1", resp.GetReservationId(), err, want.GetReservationId())
	}
	if a.runs.Load() != 1 || b.runs.Load() != 0 {
		t.Errorf("runs: A %d, B %d; want 1 and 0", a.runs.Load(), b.runs.Load())
	}
	sta, stb := stats(t, ga), stats(t, gb)
	if sta.LeasesLost != 0 || sta.StoreErrors != 0 || sta.NotKept != 0 || stb.StoreErrors != 0 || stb.Waited != 1 || stb.Replayed != 1 {
		t.Errorf("stats A %+v, B %+v: want no lease lost, no store error, B waited once and replayed", sta, stb)
	}
}

// loadScripts runs each of s's scripts once, so that Redis has them cached:
// go-redis sends EVALSHA, and on NOSCRIPT the script itself, which doubles
// the first call's round trips.
func loadScripts(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Claim(ctx, "load", "t", server.Fingerprint{}, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, "load", "t", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "load", "other", nil, time.Second); err != server.ErrNotOwner {
		t.Fatalf("Complete by another token: %v, want ErrNotOwner", err)
	}
	if err := s.Release(ctx, "load", "t"); err != nil {
		t.Fatal(err)
	}
}
