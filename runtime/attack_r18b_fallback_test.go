package runtime_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackR18BOnlyAFallbackThatAnswersIsCounted: the metric and the
// event say "answered by the fallback". A fallback that answers nothing
// (nil, nil: the call's error stands) or panics did not answer: the
// caller got the failure, and counting it would have an alert on
// fallbacks_total report callers served who were not. A fallback that
// answers, with a response or an error of its own, is counted, once.
func TestAttackR18BOnlyAFallbackThatAnswersIsCounted(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Fail(codes.Unavailable))
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var events []runtime.Event
	var mode atomic.Int32 // 0 nil, nil; 1 panic; 2 a response; 3 an error of its own
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithObserver(func(e runtime.Event) {
			if e.Kind == runtime.EventFallback {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		})},
		StockReportFallback: func(context.Context, *inventoryv1.StockReportRequest, error) (*inventoryv1.StockReportResponse, error) {
			switch mode.Load() {
			case 1:
				panic("r18b: fallback bug")
			case 2:
				return &inventoryv1.StockReportResponse{}, nil
			case 3:
				return nil, status.Error(codes.Unavailable, "r18b: the fallback's own error")
			}
			return nil, nil
		},
	}, func(p *policy.Service) { p.Breaker = nil })
	report := func() (*inventoryv1.StockReportResponse, error) {
		return c.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "w"})
	}
	counted := func() float64 {
		return r18bSeries(t, reg, "resilient_client_fallbacks_total", "StockReport", "cause")["unavailable"]
	}
	for range 3 {
		if _, err := report(); status.Code(err) != codes.Unavailable {
			t.Fatalf("%v, want the call's UNAVAILABLE", err)
		}
	}
	mode.Store(1)
	if p := r18Panicked(func() { _, _ = report() }); p != "r18b: fallback bug" {
		t.Fatalf("recovered %v, want the fallback's panic", p)
	}
	mu.Lock()
	n := len(events)
	mu.Unlock()
	if got := counted(); got != 0 || n != 0 {
		t.Errorf("fallbacks_total %v and %d events after 4 calls the fallback did not answer, want 0 and 0", got, n)
	}
	mode.Store(2)
	if resp, err := report(); err != nil || resp == nil {
		t.Fatalf("%v %v, want the fallback's response", resp, err)
	}
	mode.Store(3)
	if _, err := report(); err == nil || err.Error() != "rpc error: code = Unavailable desc = r18b: the fallback's own error" {
		t.Fatalf("%v, want the fallback's own error", err)
	}
	mu.Lock()
	n = len(events)
	mu.Unlock()
	if got := counted(); got != 2 || n != 1 {
		t.Errorf("fallbacks_total %v and %d events after 2 answers of the fallback, want 2 and 1 (one episode)", got, n)
	}
	if got := srv.Calls(atkStockReport); got != 6 {
		t.Errorf("server saw %d calls, want 6", got)
	}
}

// TestAttackR18BFallbackAndTheCachesSharedCall: a caller of a cached
// method who cancels while the shared call runs gets CANCELLED and no
// fallback; one whose deadline passes with no stale answer kept gets the
// fallback (its deadline is a failure of the dependency); the shared call
// runs on for the next caller either way.
func TestAttackR18BFallbackAndTheCachesSharedCall(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	srv, cc := startFault(t, atkHold(release))
	var fellBack atomic.Int32
	var seen atomic.Value
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}, inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			fellBack.Add(1)
			seen.Store(status.Code(err))
			return &inventoryv1.GetStockResponse{Units: -1}, nil
		},
	})
	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetStock(cctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		done <- err
	}()
	atkWaitFor(t, "the shared call reaches the server", func() bool { return srv.Calls(atkGetStock) == 1 })
	// A second caller, with a deadline, joins the same flight.
	dctx, dcancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer dcancel()
	resp, err := c.GetStock(dctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	if err != nil || resp.GetUnits() != -1 || fellBack.Load() != 1 || seen.Load() != codes.DeadlineExceeded {
		t.Errorf("caller whose deadline passed: %v %v, fallback ran %d times with %v; want its answer for DEADLINE_EXCEEDED",
			resp, err, fellBack.Load(), seen.Load())
	}
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("caller who cancelled: %v, want CANCELLED", err)
	}
	if fellBack.Load() != 1 {
		t.Errorf("the fallback ran %d times, want once: never for the caller who cancelled", fellBack.Load())
	}
	close(release) // the attempt on the wire answers, and is kept
	atkWaitFor(t, "the abandoned attempt's answer is kept", func() bool {
		r, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		return err == nil && r.GetUnits() == 42
	})
	// The waiting above may start a new call before the abandoned one's
	// answer is kept (README: the abandoned call is forgotten), never more.
	if got, cut := srv.Calls(atkGetStock), srv.Cancelled(atkGetStock); got > 2 || cut != 0 {
		t.Errorf("server saw %d calls, %d cancelled; want the shared call run to its end, and at most one more", got, cut)
	}
}
