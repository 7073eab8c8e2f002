package redisstore

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18WaiterBehindSlowRedis: every Redis reply is held 40 ms; a
// repeat waits, polling, for a request that runs longer than the repeat's
// deadline. A waiter never runs without dedup, so its polls need not
// leave three quarters of its time to a handler, as a first claim does
// for OnStoreError. Bounding each poll by a quarter of the time left,
// though, makes the polls time out once less than 160 ms is left: the
// waiter then answers UNAVAILABLE ("the idempotency store stopped
// answering") well before its deadline, counts a store error and logs the
// store as failing, for a store that only answers in 40 ms. The waiter
// must end at its deadline with DEADLINE_EXCEEDED, and the store, which
// answered every poll, must count no error.
func TestAttackR18WaiterBehindSlowRedis(t *testing.T) {
	r := startRedis(t)
	p := tcpproxy.Start(t, r.addr)
	started := make(chan struct{})
	var once sync.Once // a second run is counted below, not a panic
	srv := &reserver{answer: "a", hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		once.Do(func() { close(started) })
		select {
		case <-time.After(900 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	logs := &logCounter{}
	s := New(client(t, p.Addr()), "slowwait:")
	g, c := guarded(t, srv, reserveStockPolicy(2*time.Second, policy.StoreErrorRunWithoutDedup), server.WithStore(s), server.WithLogger(slog.New(logs)))
	loadScripts(t, s)
	p.DelayReplies(40 * time.Millisecond)

	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, c, "sw-1", 5*time.Second)
		first <- err
	}()
	<-started
	const deadline = 400 * time.Millisecond
	start := time.Now()
	_, err := reserve(t, c, "sw-1", deadline)
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded || took < deadline-20*time.Millisecond {
		t.Errorf("the waiter: %v after %s, want DEADLINE_EXCEEDED at its %s deadline", err, took, deadline)
	}
	if err := <-first; err != nil {
		t.Errorf("the running request: %v", err)
	}
	st := stats(t, g)
	if st.StoreErrors != 0 || st.Waited != 1 || st.RanWithoutDedup != 0 {
		t.Errorf("stats %+v: want the wait counted, no store error, nothing run without dedup", st)
	}
	if n := logs.count("idempotency store failing"); n != 0 {
		t.Errorf("%d warnings that the store is failing, want none: it answered every poll in 40 ms", n)
	}
	if n := srv.runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}
