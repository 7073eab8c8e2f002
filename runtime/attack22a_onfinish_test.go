package runtime_test

// Attacks on the caller's grpc.OnFinish option (grpc-go: "The onFinish
// callback provided will only be called once by gRPC"). The runtime makes
// several gRPC calls of one call of the caller's (retries, hedged copies,
// a cache's shared call); a caller that closes a channel, ends a span or
// calls WaitGroup.Done in it must see it called once, with the call's
// own result, whatever the runtime did beneath.

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack22aFinishes records the errors an OnFinish callback was called
// with.
type attack22aFinishes struct {
	mu   sync.Mutex
	errs []error
}

func (f *attack22aFinishes) option() grpc.CallOption {
	return grpc.OnFinish(func(err error) {
		f.mu.Lock()
		f.errs = append(f.errs, err)
		f.mu.Unlock()
	})
}

func (f *attack22aFinishes) got() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...)
}

// wantOnce fails the test unless the callback ran exactly once, with an
// error of code want.
func (f *attack22aFinishes) wantOnce(t *testing.T, what string, want codes.Code) {
	t.Helper()
	got := f.got()
	if len(got) != 1 {
		t.Errorf("%s: OnFinish ran %d times (%v), want once", what, len(got), got)
		return
	}
	if status.Code(got[0]) != want {
		t.Errorf("%s: OnFinish ran with %v, want %v", what, got[0], want)
	}
}

// TestAttack22aOnFinishRunsOncePerCall: a retried call (UNAVAILABLE, then
// an answer), a retried call that fails every attempt, a hedged call
// whose second copy wins, a call the bulkhead refuses. Before,
// gRPC ran the callback once per attempt or copy: with the UNAVAILABLE
// of the first attempt, then the answer; with the winner's answer, then
// the loser's CANCELLED.
func TestAttack22aOnFinishRunsOncePerCall(t *testing.T) {
	atkNoLeak(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	retrying := func(p *policy.Service) {
		m := atkMethod(p, atkGetStock)
		m.Hedging = nil
		m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
	}

	t.Run("retried, then answered", func(t *testing.T) {
		srv, cc := startFault(t, faultserver.PerCall(server.Fail(codes.Unavailable), server.Healthy))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, retrying)
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, req, f.option()); err != nil {
			t.Fatalf("GetStock: %v", err)
		}
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Fatalf("the server saw %d calls, want 2", n)
		}
		f.wantOnce(t, "a call answered on its second attempt", codes.OK)
	})

	t.Run("every attempt failed", func(t *testing.T) {
		srv, cc := startFault(t, server.Fail(codes.Unavailable))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, retrying)
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, req, f.option()); status.Code(err) != codes.Unavailable {
			t.Fatalf("GetStock: %v, want UNAVAILABLE", err)
		}
		if n := srv.Calls(atkGetStock); n != 3 {
			t.Fatalf("the server saw %d calls, want 3", n)
		}
		f.wantOnce(t, "a call that failed 3 attempts", codes.Unavailable)
	})

	t.Run("hedged", func(t *testing.T) {
		never := make(chan struct{})
		srv, cc := startFault(t, faultserver.PerCall(atkHold(never), server.Healthy))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			m := atkMethod(p, atkGetStock)
			m.Retry = nil
			m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 2}
			p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		})
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, req, f.option()); err != nil {
			t.Fatalf("GetStock: %v", err)
		}
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Fatalf("the server saw %d calls, want 2", n)
		}
		f.wantOnce(t, "a hedged call whose second copy won", codes.OK)
	})

	t.Run("refused by the bulkhead", func(t *testing.T) {
		release := make(chan struct{})
		srv, cc := startFault(t, atkHold(release))
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
			retrying(p)
			p.Bulkhead = &policy.Bulkhead{Permits: 1}
			atkMethod(p, atkGetStock).Bulkhead = nil
		})
		done := make(chan error, 1)
		go func() { _, err := c.GetStock(ctx, req); done <- err }()
		atkWaitFor(t, "the first call reaches the server", func() bool { return srv.Calls(atkGetStock) == 1 })
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, req, f.option()); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("GetStock: %v, want RESOURCE_EXHAUSTED", err)
		}
		f.wantOnce(t, "a call the bulkhead refused", codes.ResourceExhausted)
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("the first call: %v", err)
		}
	})
}

// TestAttack22aOnFinishOfACachedCall: GetStock cached. The first caller
// starts the shared call; a second joins it; a third is a fresh hit. Each
// caller's callback runs once, with its own result, before its call
// returns. Before, the first caller's ran on the shared call's goroutine
// (after its call returned, when it had left), and the others' never.
func TestAttack22aOnFinishOfACachedCall(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	srv, cc := startFault(t, atkHold(release))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		atkMethod(p, atkGetStock).Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	var first, second, third attack22aFinishes
	done := make(chan error, 2)
	go func() { _, err := c.GetStock(ctx, req, first.option()); done <- err }()
	atkWaitFor(t, "the shared call reaches the server", func() bool { return srv.Calls(atkGetStock) == 1 })
	go func() { _, err := c.GetStock(ctx, req, second.option()); done <- err }()
	time.Sleep(20 * time.Millisecond) // the second caller joins the shared call
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("GetStock: %v", err)
		}
	}
	// Each call has returned: its callback must have run by then.
	first.wantOnce(t, "the caller that started the shared call", codes.OK)
	second.wantOnce(t, "a caller that joined it", codes.OK)
	if _, err := c.GetStock(ctx, req, third.option()); err != nil {
		t.Fatalf("GetStock: %v", err)
	}
	third.wantOnce(t, "a fresh hit", codes.OK)
	if n := srv.Calls(atkGetStock); n != 1 {
		t.Errorf("the server saw %d calls, want 1", n)
	}
}

// TestAttack22aOnFinishOfARefusedStream: WatchStock's bulkhead (4
// permits) is full of streams the server holds open; a fifth stream,
// given grpc.OnFinish, is refused RESOURCE_EXHAUSTED. A unary call the
// runtime refuses runs the callback once, and so does the refused stream,
// though no gRPC stream was made (grpc-go runs it for a stream it fails to
// start).
func TestAttack22aOnFinishOfARefusedStream(t *testing.T) {
	atkNoLeak(t)
	never := make(chan struct{})
	srv, cc := startFault(t, atkHold(never))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 4 {
		if _, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}); err != nil {
			t.Fatalf("WatchStock: %v", err)
		}
	}
	atkWaitFor(t, "the server holds 4 streams", func() bool { return srv.InFlight() == 4 })
	var f attack22aFinishes
	if _, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}, f.option()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the fifth WatchStock: %v, want RESOURCE_EXHAUSTED", err)
	}
	f.wantOnce(t, "a stream the bulkhead refused", codes.ResourceExhausted)
	cancel()
	atkWaitFor(t, "the streams end", func() bool { return srv.InFlight() == 0 })
}
