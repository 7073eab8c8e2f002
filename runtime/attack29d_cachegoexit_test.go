package runtime_test

// Attack on a cache's shared call ended by runtime.Goexit (README, Cache:
// "each caller still waiting gets at once an INTERNAL *runtime.Error
// without a sentinel, ... which neither a stale answer nor the fallback
// stands in for ...; no answer is kept ..., and the key's next caller
// starts a new call"), where cachegoexit_test.go has no answer kept to
// stand in: here one is, stale, and one waiter has no deadline at all.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack29DSharedCallGoexitOverAStaleAnswer: GetStock cached (fresh
// 1 min, stale 1 h, on the test's clock) with a fallback. A first call
// keeps apple's answer; the clock moves 2 min, so that it is stale. The
// next shared call of apple, with three callers waiting (two with 2 s
// deadlines, one with none), ends its goroutine by runtime.Goexit in the
// client's interceptor once gRPC answered. Each of the three must get at
// once (under 1 s) the INTERNAL error naming runtime.Goexit: not the
// stale answer (42 units, kept and younger than its stale TTL), not the
// fallback's (-1), and the one without a deadline must not wait for
// ever. The key's next caller starts a new call (the server sees it) and
// gets its answer.
func TestAttack29DSharedCallGoexitOverAStaleAnswer(t *testing.T) {
	atkNoLeak(t)
	r := newCgxRig()
	var armed atomic.Bool
	clock := newAtkClock()
	r.build(t, server.Healthy, r.goexitOnce(&armed), []runtime.Option{runtime.WithClock(clock)}, func(_ *policy.Service, m *policy.Method) {
		m.Cache.StaleTTL = time.Hour
	})
	if first := r.get(time.Second); first.err != nil || first.resp.GetUnits() != 42 {
		t.Fatalf("the first call: %v, want the server's 42 units", first)
	}
	clock.Advance(2 * time.Minute)
	armed.Store(true)

	const waiters = 3
	results := make(chan cgxResult, waiters)
	for range waiters - 1 {
		go func() { results <- r.get(2 * time.Second) }()
	}
	noDeadline, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		start := time.Now()
		resp, err := r.c.GetStock(noDeadline, &inventoryv1.GetStockRequest{Sku: "apple"})
		results <- cgxResult{resp, err, time.Since(start)}
	}()
	r.wait(t, r.arrived, "the shared call reaches the client's interceptor")
	atkWaitFor(t, "3 callers wait for the shared call", func() bool { return r.m.CacheWaiters23j("apple") == waiters })
	before := r.srv.Calls(atkGetStock)
	r.let()
	r.wait(t, r.exited, "the runtime.Goexit")
	var got []cgxResult
	soon := time.After(time.Second)
collect:
	for len(got) < waiters {
		select {
		case res := <-results:
			got = append(got, res)
		case <-soon:
			break collect
		}
	}
	cancel() // the caller without a deadline, if it still waits
	for len(got) < waiters {
		got = append(got, <-results)
	}
	ended, stale := 0, 0
	for _, res := range got {
		if cgxGoexitError(res.err) && res.took < 1500*time.Millisecond {
			ended++
		}
		if res.err == nil {
			stale++
		}
	}
	later := r.get(time.Second)
	sent := r.srv.Calls(atkGetStock) - before
	t.Logf("waiters: %v; later caller: %v; the server saw %d calls after the Goexit's", got, later, sent-1)
	if ended != waiters {
		t.Errorf("%d of %d waiters got at once the INTERNAL error naming runtime.Goexit (%d got an answer, stale or the fallback's): %v",
			ended, waiters, stale, got)
	}
	if n := r.fellBack.Load(); n != 0 {
		t.Errorf("the fallback ran %d times, want none", n)
	}
	if later.err != nil || later.resp.GetUnits() != 42 || sent < 2 {
		t.Errorf("the key's next caller: %v, with %d calls sent for it; want a new call's answer", later, sent-1)
	}
}
