package runtime_test

// Attacks on "the caller's grpc.OnFinish runs exactly once per call, with
// the caller's result" (README, Retries), on the endings attack22a did
// not try: a context cancelled during a backoff, two callbacks, a
// callback that panics, the breaker's and the rate limit's refusals, a
// fallback's answer, a client-side failure no fallback hides, a stale
// answer, a caller that leaves a shared call before it ends, a keyed
// call retried, a hedged call whose losing copy ends after the winner.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack22dPlain takes the budget-free retry, the breaker and the
// adaptive layers out of GetStock's policy, so that each case adds only
// the layer it attacks.
func attack22dPlain(p *policy.Service) *policy.Method {
	p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead = nil, nil, nil, nil
	m := atkMethod(p, atkGetStock)
	m.Retry, m.Hedging = nil, nil
	return m
}

func TestAttack22dOnFinishOncePerCall(t *testing.T) {
	atkNoLeak(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	apple := &inventoryv1.GetStockRequest{Sku: "apple"}

	t.Run("cancelled during a backoff", func(t *testing.T) {
		// The server pushes back 10 s: the retry waits exactly that, and
		// the caller cancels while it waits.
		srv, cc := startFault(t, faultserver.Pushback(codes.Unavailable, 10*time.Second))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			attack22dPlain(p).Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
				Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		})
		cctx, ccancel := context.WithCancel(context.Background()) // no deadline: the 10 s wait fits
		defer ccancel()
		go func() {
			for srv.Calls(atkGetStock) == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			ccancel()
		}()
		var f attack22aFinishes
		start := time.Now()
		if _, err := c.GetStock(cctx, apple, f.option()); status.Code(err) != codes.Canceled {
			t.Fatalf("GetStock: %v, want CANCELLED", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the call returned after %s, want at its cancellation", took)
		}
		f.wantOnce(t, "a call cancelled in its backoff", codes.Canceled)
		if n := srv.Calls(atkGetStock); n != 1 {
			t.Errorf("the server saw %d calls, want 1", n)
		}
	})

	t.Run("two callbacks, in order", func(t *testing.T) {
		srv, cc := startFault(t, faultserver.PerCall(server.Fail(codes.Unavailable), server.Healthy))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			attack22dPlain(p).Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
				Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		})
		var order []int
		var a, b attack22aFinishes
		first := grpc.OnFinish(func(error) { order = append(order, 1) })
		second := grpc.OnFinish(func(error) { order = append(order, 2) })
		if _, err := c.GetStock(ctx, apple, first, a.option(), grpc.WaitForReady(true), second, b.option()); err != nil {
			t.Fatalf("GetStock: %v", err)
		}
		a.wantOnce(t, "the first callback", codes.OK)
		b.wantOnce(t, "the second callback", codes.OK)
		if len(order) != 2 || order[0] != 1 || order[1] != 2 {
			t.Errorf("the callbacks ran in the order %v, want [1 2]", order)
		}
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2", n)
		}
	})

	t.Run("a callback that panics", func(t *testing.T) {
		srv, cc := startFault(t, server.Healthy)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			attack22dPlain(p)
			p.Bulkhead = &policy.Bulkhead{Permits: 1}
		})
		boom := errors.New("the callback's panic")
		got := func() (r any) {
			defer func() { r = recover() }()
			_, _ = c.GetStock(ctx, apple, grpc.OnFinish(func(error) { panic(boom) }))
			return nil
		}()
		if got != boom {
			t.Fatalf("recovered %v, want the callback's own panic on the caller's goroutine", got)
		}
		atkWantNoPermits(t, c.Runtime(), atkGetStock, "after a call whose callback panicked")
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, apple, f.option()); err != nil {
			t.Fatalf("the next call: %v", err)
		}
		f.wantOnce(t, "the next call", codes.OK)
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2", n)
		}
	})

	t.Run("refused by the open breaker", func(t *testing.T) {
		srv, cc := startFault(t, server.Fail(codes.Unavailable))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			attack22dPlain(p)
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Minute, CoolDown: time.Hour,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		})
		for range 2 {
			_, _ = c.GetStock(ctx, apple)
		}
		atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "the breaker is %v after 2 failures, want open")
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, apple, f.option()); !errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("GetStock: %v, want ErrCircuitOpen", err)
		}
		f.wantOnce(t, "a call the open breaker refused", codes.Unavailable)
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2", n)
		}
	})

	t.Run("refused by the rate limit", func(t *testing.T) {
		srv, cc := startFault(t, server.Healthy)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			attack22dPlain(p)
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1}
		})
		var first, second attack22aFinishes
		if _, err := c.GetStock(ctx, apple, first.option()); err != nil {
			t.Fatalf("the first call: %v", err)
		}
		if _, err := c.GetStock(ctx, apple, second.option()); !errors.Is(err, runtime.ErrRateLimited) {
			t.Fatalf("the second call: %v, want ErrRateLimited", err)
		}
		first.wantOnce(t, "the call the rate limit let through", codes.OK)
		second.wantOnce(t, "a call the rate limit refused", codes.ResourceExhausted)
		if n := srv.Calls(atkGetStock); n != 1 {
			t.Errorf("the server saw %d calls, want 1", n)
		}
	})

	t.Run("answered by the fallback; a client-side failure is not", func(t *testing.T) {
		srv, cc := startFault(t, server.Fail(codes.Unavailable))
		var fell atomic.Int32
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
			GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
				fell.Add(1)
				return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: 7}, nil
			},
		}, func(p *policy.Service) { attack22dPlain(p) })
		var f attack22aFinishes
		if resp, err := c.GetStock(ctx, apple, f.option()); err != nil || resp.GetUnits() != 7 {
			t.Fatalf("GetStock: %v, %v; want the fallback's 7 units", resp, err)
		}
		f.wantOnce(t, "a call the fallback answered", codes.OK)
		var g attack22aFinishes
		if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "\xff"}, g.option()); status.Code(err) != codes.Internal {
			t.Fatalf("GetStock of a sku that is not UTF-8: %v, want INTERNAL", err)
		}
		g.wantOnce(t, "a call that failed on the client's side", codes.Internal)
		if n, calls := fell.Load(), srv.Calls(atkGetStock); n != 1 || calls != 1 {
			t.Errorf("the fallback ran %d times, the server saw %d calls; want 1 and 1", n, calls)
		}
	})

	t.Run("a stale answer", func(t *testing.T) {
		srv, cc := startFault(t, server.Healthy)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			attack22dPlain(p).Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Millisecond, StaleTTL: time.Hour, MaxEntries: 10}
		})
		if _, err := c.GetStock(ctx, apple); err != nil {
			t.Fatalf("the first call: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // past fresh_ttl
		srv.SetBehaviour(server.Fail(codes.Unavailable))
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, apple, f.option()); err != nil {
			t.Fatalf("GetStock: %v, want the stale answer", err)
		}
		f.wantOnce(t, "a call the stale answer stood in for", codes.OK)
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2", n)
		}
	})

	t.Run("a caller that leaves a shared call", func(t *testing.T) {
		release := make(chan struct{})
		srv, cc := startFault(t, atkHold(release))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			m := attack22dPlain(p)
			m.Timeout = 5 * time.Second
			m.Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}
		})
		lctx, lcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer lcancel()
		var f attack22aFinishes
		if _, err := c.GetStock(lctx, apple, f.option()); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("GetStock: %v, want DEADLINE_EXCEEDED", err)
		}
		f.wantOnce(t, "a caller whose deadline passed in the shared call", codes.DeadlineExceeded)
		close(release) // the shared call, left, answers now
		atkWaitFor(t, "the shared call ends on the server", func() bool { return srv.InFlight() == 0 })
		time.Sleep(20 * time.Millisecond) // its answer reaches the cache
		var g attack22aFinishes
		if _, err := c.GetStock(ctx, apple, g.option()); err != nil {
			t.Fatalf("GetStock after the late answer: %v", err)
		}
		g.wantOnce(t, "a hit of the late answer", codes.OK)
		f.wantOnce(t, "the caller that left, once the shared call answered", codes.DeadlineExceeded)
		if n := srv.Calls(atkGetStock); n != 1 {
			t.Errorf("the server saw %d calls, want 1 (the hit answers)", n)
		}
	})

	t.Run("a keyed call retried", func(t *testing.T) {
		srv, cc := startFault(t, faultserver.PerCall(server.Fail(codes.Unavailable), server.Healthy))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
			atkMethod(p, atkReserveStock).Retry.InitialBackoff = time.Millisecond
		})
		var f attack22aFinishes
		if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-22d", Sku: "apple", Units: 1}, f.option()); err != nil {
			t.Fatalf("ReserveStock: %v", err)
		}
		f.wantOnce(t, "a keyed call answered on its second attempt", codes.OK)
		if n := srv.Calls(atkReserveStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2", n)
		}
	})

	t.Run("a hedged call whose loser ends after the winner", func(t *testing.T) {
		// The first copy is held until after the call returned, then
		// answers UNAVAILABLE (if gRPC had not already cancelled it).
		loserGo := make(chan struct{})
		srv, cc := startFault(t, faultserver.PerCall(func(ctx context.Context, _ server.Call) error {
			select {
			case <-loserGo:
			case <-ctx.Done():
			}
			time.Sleep(20 * time.Millisecond)
			return status.Error(codes.Unavailable, "the loser, late")
		}, server.Healthy))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			attack22dPlain(p).Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 2,
				NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		})
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, apple, f.option()); err != nil {
			t.Fatalf("GetStock: %v", err)
		}
		close(loserGo)
		atkWaitFor(t, "the loser ends on the server", func() bool { return srv.InFlight() == 0 })
		time.Sleep(20 * time.Millisecond)
		f.wantOnce(t, "a hedged call, its loser ended after", codes.OK)
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Errorf("the server saw %d calls, want 2", n)
		}
	})
}
