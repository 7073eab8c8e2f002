package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack20cStreamsCancelledTogetherUnderAUnaryStorm: four watchers
// hold every permit of the service's bulkhead (4, no max_wait) on a server
// whose streams never send; eight goroutines hammer GetStock on the same
// bulkhead, refused ErrBulkheadFull. All four streams are cancelled at
// once, two of them being read (their Recv ends too), two never read.
// The permits go to the unary calls (reaped or given back), never more
// than four taken at once (the server learns of a cancellation later, so
// its own count may briefly read five), and once the storm
// is over no permit is held (BulkheadInUse and bulkhead_in_use both 0),
// the breaker is closed (cancellations and refusals count for nothing),
// and four new streams fit again, a fifth refused.
func TestAttack20cStreamsCancelledTogetherUnderAUnaryStorm(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		if c.Method == atkWatchStock {
			return server.Hang(ctx, c)
		}
		return server.Wait(ctx, 2*time.Millisecond)
	})
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, func(p *policy.Service) {
		p.Breaker = breakerPolicy(4, 1)
		p.Bulkhead = &policy.Bulkhead{Permits: 4}
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
		w := atkMethod(p, atkWatchStock)
		w.Bulkhead, w.Breaker = nil, nil
		w.Timeout = 5 * time.Second
		g := atkMethod(p, atkGetStock)
		g.Bulkhead, g.Breaker, g.Retry = nil, nil, nil
		g.Timeout = time.Second
	})
	rt := c.Runtime()
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}
	var cancels []context.CancelFunc
	var streams []inventoryv1.InventoryService_WatchStockClient
	for i := range 4 {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := c.WatchStock(ctx, req)
		if err != nil {
			cancel()
			t.Fatalf("stream %d: %v", i, err)
		}
		cancels, streams = append(cancels, cancel), append(streams, st)
	}
	atkWaitFor(t, "four streams on the server", func() bool { return srv.InFlight() == 4 })

	var ok, full, maxIn atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, runtime.ErrBulkheadFull):
					full.Add(1)
					time.Sleep(100 * time.Microsecond)
				default:
					t.Errorf("GetStock: %v", err)
				}
				if n := int64(atkInUse(t, rt, atkGetStock)); n > maxIn.Load() {
					maxIn.Store(n)
				}
			}
		})
	}
	atkWaitFor(t, "refusals while the streams hold every permit", func() bool { return full.Load() > 20 })
	if n := ok.Load(); n != 0 {
		t.Errorf("%d GetStock answered while four streams held the four permits", n)
	}
	var rw sync.WaitGroup
	for i := range 2 {
		rw.Go(func() { _, _ = streams[i].Recv() })
	}
	for _, cancel := range cancels {
		cancel()
	}
	atkWaitFor(t, "unary calls answered after the streams were cancelled", func() bool { return ok.Load() > 50 })
	close(stop)
	wg.Wait()
	rw.Wait()
	if m := maxIn.Load(); m > 4 {
		t.Errorf("%d permits of 4 taken at once", m)
	}
	atkWantFree(t, rt, atkGetStock, "the storm")
	wantMetric(t, reg, 0, "resilient_client_bulkhead_in_use", "dependency", attack20bDep, "bulkhead", "shared")
	if s, _ := rt.BreakerState(atkGetStock); s != runtime.StateClosed {
		t.Errorf("breaker %v after cancellations and refusals, want closed", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 4 {
		if _, err := c.WatchStock(ctx, req); err != nil {
			t.Fatalf("held stream %d of 4 after the storm: %v", i+1, err)
		}
	}
	if _, err := c.WatchStock(ctx, req); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("a fifth stream with four held: %v, want ErrBulkheadFull", err)
	}
	cancel()
	atkWantFree(t, rt, atkGetStock, "the last streams were cancelled")
	t.Logf("%d answered, %d refused", ok.Load(), full.Load())
}
