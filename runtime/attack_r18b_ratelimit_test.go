package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackR18BRateLimitSharedAcrossMethodsNotWithAMethodsOwn: the
// service's bucket is one for every method without a limit of its own,
// and a method with its own (per_method) neither draws from the shared
// bucket nor lends to it. A slow refill (one token a minute) keeps the
// counts exact however slow the machine.
func TestAttackR18BRateLimitSharedAcrossMethodsNotWithAMethodsOwn(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 1.0 / 60, Burst: 4}
		atkMethod(p, atkGetStock).Retry = nil
		// ReserveStock has a bucket of its own, of 2.
		atkMethod(p, inventoryv1.InventoryService_ReserveStock_FullMethodName).RateLimit = &policy.RateLimit{RequestsPerSecond: 1.0 / 60, Burst: 2}
	})
	ctx := context.Background()
	limited := func(err error) bool {
		return errors.Is(err, runtime.ErrRateLimited) && status.Code(err) == codes.ResourceExhausted
	}
	// The method's own bucket first: spending it leaves the shared one full.
	for i := range 3 {
		_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "apple", Units: 1})
		if (i < 2) != (err == nil) || (i == 2 && !limited(err)) {
			t.Fatalf("ReserveStock %d: %v; want its own burst of 2, then ErrRateLimited", i, err)
		}
	}
	// The shared bucket of 4, for GetStock and StockReport together.
	var ok, refused int
	for i := range 6 {
		var err error
		if i%2 == 0 {
			_, err = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		} else {
			_, err = c.StockReport(ctx, &inventoryv1.StockReportRequest{})
		}
		switch {
		case err == nil:
			ok++
		case limited(err):
			refused++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if ok != 4 || refused != 2 {
		t.Errorf("shared bucket: %d answered, %d refused; want 4 and 2 whichever method asks", ok, refused)
	}
	sent := srv.Calls(atkGetStock) + srv.Calls(atkStockReport) + srv.Calls(inventoryv1.InventoryService_ReserveStock_FullMethodName)
	if sent != 6 {
		t.Errorf("server saw %d calls, want the 6 that had a token", sent)
	}
}

// TestAttackR18BRateLimitBurstHoldsUnderConcurrentCallers: 64 callers at
// once against a burst of 5 and no wait: exactly 5 reach the server, the
// rest are refused at once.
func TestAttackR18BRateLimitBurstHoldsUnderConcurrentCallers(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 1.0 / 60, Burst: 5}
	})
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	gate := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-gate
			begin := time.Now()
			_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, runtime.ErrRateLimited):
				refused.Add(1)
				if took := time.Since(begin); took > time.Second {
					t.Errorf("a refusal took %v, want at once", took)
				}
			default:
				t.Errorf("unexpected %v", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if ok.Load() != 5 || refused.Load() != 59 || srv.Calls(atkStockReport) != 5 {
		t.Errorf("%d answered, %d refused, server saw %d; want 5, 59, 5", ok.Load(), refused.Load(), srv.Calls(atkStockReport))
	}
}
