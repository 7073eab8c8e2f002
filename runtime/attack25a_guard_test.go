package runtime_test

// The client's metrics and the server's Guard.Stats read back together
// after a known sequence against a real Guard on loopback: what one side
// counts of a shed, a too-short deadline or a replay, the other counts
// the same number of times.

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
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// One StockReport (low priority) held by the server fills the Guard's low
// limit of 1; six more are shed with RESOURCE_EXHAUSTED, which the
// client's breaker lists as a failure and must count as nothing (the
// Guard's shed mark: priority shedding says nothing of the service's
// health): six attempts_total{RESOURCE_EXHAUSTED}, Stats.Shed[Low] 6, the
// breaker closed with no transition, the handler run once. Then three
// GetStock whose deadline is under the method's MinDeadline: three
// attempts_total{DEADLINE_EXCEEDED}, Stats.DeadlineRefused 3, the breaker
// still closed. Then ReserveStock twice with one order id: the second
// replayed (Stats.Replayed 1), the handler run once, two attempts OK.
func TestAttack25aClientAndGuardCountTheSameRefusals(t *testing.T) {
	g, err := server.NewGuard(rserver.WithPolicy(inventoryService, func(p *policy.Server) {
		p.Shedding = &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 50, High: 60, Critical: 70},
			Pushback: 500 * time.Millisecond, Code: codes.ResourceExhausted}
		for i := range p.Methods {
			if p.Methods[i].Name == getStock {
				p.Methods[i].MinDeadline = 3 * time.Second
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var holding atomic.Bool
	holding.Store(true)
	srv, err := server.Start("127.0.0.1:0", func(ctx context.Context, c server.Call) error {
		if c.Method == inventoryv1.InventoryService_StockReport_FullMethodName && holding.Load() {
			return atkHold(release)(ctx, c)
		}
		return nil
	}, append(runtime.ServerOptions(), g.ServerOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cc := dialFault(t, srv.Addr())
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	rec := &atk22eEvents{}
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithObserver(rec.observe), runtime.WithClock(newAtkClock())},
	}, func(p *policy.Service) {
		p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 4, Window: 10 * time.Second, CoolDown: 10 * time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted)}
		for i := range p.Methods {
			p.Methods[i].Retry = nil
			p.Methods[i].Timeout = 10 * time.Second
		}
	})
	stats := func() rserver.Stats {
		s, ok := g.Stats(inventoryService)
		if !ok {
			t.Fatal("no stats")
		}
		return s
	}
	report := inventoryv1.InventoryService_StockReport_FullMethodName
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "w"}); err != nil {
			t.Errorf("the held StockReport: %v", err)
		}
	})
	atkWaitFor(t, "the first StockReport held", func() bool { return srv.InFlight() == 1 })
	for i := range 6 {
		if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "w"}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("StockReport %d: %v, want RESOURCE_EXHAUSTED (shed)", i+2, err)
		}
	}
	if s := stats(); s.Shed[rserver.PriorityLow] != 6 || s.Admitted[rserver.PriorityLow] != 1 || s.InFlight != 1 {
		t.Errorf("Guard: shed %d, admitted %d low, %d in flight; want 6, 1, 1", s.Shed[rserver.PriorityLow], s.Admitted[rserver.PriorityLow], s.InFlight)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=RESOURCE_EXHAUSTED,method=StockReport}": 6,
	}, "six StockReport shed")
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second) // under GetStock's MinDeadline of 3 s
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("GetStock %d: %v, want the Guard's DEADLINE_EXCEEDED", i+1, err)
		}
	}
	if s := stats(); s.DeadlineRefused != 3 {
		t.Errorf("Guard: %d refused as dead, want 3", s.DeadlineRefused)
	}
	for range 2 {
		if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "order-25a", Sku: "apple", Units: 1}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	wg.Wait()
	holding.Store(false)
	if s := stats(); s.Replayed != 1 || s.Shed[rserver.PriorityLow] != 6 || s.InFlight != 0 || s.MarkedDoNotRetry != 0 {
		t.Errorf("Guard: %d replayed, %d shed, %d in flight, %d marked; want 1, 6, 0, 0", s.Replayed, s.Shed[rserver.PriorityLow], s.InFlight, s.MarkedDoNotRetry)
	}
	if srv.Calls(report) != 1 || srv.Calls(getStock) != 0 || srv.Calls(reserveStock) != 1 {
		t.Errorf("the handlers ran StockReport %d, GetStock %d, ReserveStock %d times; want 1, 0, 1",
			srv.Calls(report), srv.Calls(getStock), srv.Calls(reserveStock))
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=RESOURCE_EXHAUSTED,method=StockReport}": 6,
		"resilient_client_attempts_total{code=OK,method=StockReport}":                 1,
		"resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=GetStock}":     3,
		"resilient_client_attempts_total{code=OK,method=ReserveStock}":                2,
	}, "the whole sequence: no breaker transition, no rejection")
	attack25aWantEvents(t, rec, nil)
}
