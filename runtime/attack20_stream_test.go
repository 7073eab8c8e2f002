package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack20CancelledStreamPermitIsBackWhenCancelReturns: the README
// says a stream gives its permit back "at once" at the end of its
// context. A watcher that cancels its stream and opens the next one at
// once (a reconnect) under a bulkhead of 1 permit and no max_wait must
// find the permit free: cancel has returned, the stream is over.
func TestAttack20CancelledStreamPermitIsBackWhenCancelReturns(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := atkMethod(p, atkWatchStock)
		m.Timeout = 5 * time.Second
		m.Bulkhead.Permits, m.Bulkhead.MaxWait = 1, 0
	})
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}
	full := 0
	const rounds = 200
	for range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := c.WatchStock(ctx, req)
		if errors.Is(err, runtime.ErrBulkheadFull) {
			full++
			cancel()
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		_ = st
		cancel()
	}
	if full > 0 {
		t.Errorf("%d of %d streams opened right after the previous one was cancelled were refused ErrBulkheadFull: the cancelled stream's permit was not back when cancel returned", full, rounds)
	}
}

// TestAttack20CancelledStreamPermitIsBackForAUnaryCall: the same with the
// stream on the service's bulkhead, shared with GetStock: a unary call
// made as soon as the stream's caller cancelled it finds the permit free.
func TestAttack20CancelledStreamPermitIsBackForAUnaryCall(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = &policy.Bulkhead{Permits: 1}
		atkMethod(p, atkWatchStock).Bulkhead = nil
		atkMethod(p, atkWatchStock).Timeout = 5 * time.Second
	})
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}
	full := 0
	const rounds = 100
	for range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := c.WatchStock(ctx, req); err != nil {
			cancel()
			t.Fatalf("stream: %v", err)
		}
		cancel()
		_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		switch {
		case errors.Is(err, runtime.ErrBulkheadFull):
			full++
			time.Sleep(time.Millisecond)
		case err != nil:
			t.Fatalf("GetStock: %v", err)
		}
	}
	if full > 0 {
		t.Errorf("%d of %d calls made right after a stream was cancelled were refused ErrBulkheadFull", full, rounds)
	}
	if n := srv.Calls(atkGetStock); n != rounds-full {
		t.Errorf("server saw %d GetStock, want %d", n, rounds-full)
	}
}
