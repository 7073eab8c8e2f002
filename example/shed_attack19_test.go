package example_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// TestAttack19ShedAndFailingStillOpensTheBreaker: the server sheds every
// low request (StockReport, marked) and fails every GetStock it admits
// (a plain UNAVAILABLE of its handler). Interleaved one for one, the shed
// refusals count as nothing and the failures as failures: the shared
// breaker opens at its twentieth counted failure (minimum_calls 20, ratio
// 0.5, a fake clock so the window holds them all), not later for the
// refusals beside them, and then refuses on the client: the server sees
// no GetStock after the twentieth, and the reports no longer reach it.
func TestAttack19ShedAndFailingStillOpensTheBreaker(t *testing.T) {
	clock := &shedClock{now: time.Unix(1e9, 0)}
	failing := func(_ context.Context, c server.Call) error {
		if c.Method == getStock {
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	}
	plain := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Retry, p.Methods[0].Cache = nil, nil
	})
	r := fullLowShedding(t, failing, 10*time.Millisecond, runtime.WithClock(clock), plain)
	opened := 0
	for i := range 40 {
		_, rerr := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("r", i)})
		_, gerr := r.client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", i)})
		if st, _ := r.client.Runtime().BreakerState(getStock); st == runtime.StateOpen {
			opened = i + 1
			break
		}
		if status.Code(rerr) != codes.Unavailable || status.Code(gerr) != codes.Unavailable {
			t.Fatalf("round %d: report %v, GetStock %v; want both UNAVAILABLE", i, rerr, gerr)
		}
	}
	if opened != 20 {
		t.Fatalf("the breaker opened after %d rounds (0: never in 40); want the 20th, its minimum_calls of failures", opened)
	}
	if n, s := r.srv.Calls(getStock), r.stats(); n != 20 || s.Shed[rserver.PriorityLow] != 20 {
		t.Errorf("server ran %d GetStock and shed %d reports; want 20 and 20", n, s.Shed[rserver.PriorityLow])
	}
	_, err := r.client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "after"})
	_, rerr := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "after"})
	if !errors.Is(err, runtime.ErrCircuitOpen) || !errors.Is(rerr, runtime.ErrCircuitOpen) || r.srv.Calls(getStock) != 20 || r.stats().Shed[rserver.PriorityLow] != 20 {
		t.Errorf("after the opening: GetStock %v, report %v (server ran %d GetStock, shed %d); want both refused on the client",
			err, rerr, r.srv.Calls(getStock), r.stats().Shed[rserver.PriorityLow])
	}
}

// TestAttack19TightDeadlinesOfOneCallerOpenTheSharedBreaker: a healthy
// server whose Guard refuses requests that leave less than GetStock's
// MinDeadline (raised to 300 ms here) with DEADLINE_EXCEEDED before
// decoding. One caller sends 25 GetStock calls with 100 ms deadlines:
// each is refused at once, the server healthy and idle. The refusal says
// the caller left too little time, nothing of whether the dependency
// serves (as the README says of a shed refusal), yet DEADLINE_EXCEEDED
// is a default failure code and the client's verdict counts it: the
// breaker the generated client shares across its methods opens, and a
// ReserveStock with two seconds to spare is refused on the client.
func TestAttack19TightDeadlinesOfOneCallerOpenTheSharedBreaker(t *testing.T) {
	minDeadline := rserver.WithPolicy(inventoryName, func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == getStock {
				p.Methods[i].MinDeadline = 300 * time.Millisecond
				p.Methods[i].DefaultTimeout = time.Second
			}
		}
	})
	plain := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Retry, p.Methods[0].Cache = nil, nil
	})
	r := newRig(t, nil, []rserver.Option{minDeadline}, plain)
	r.warm(t)
	for i := range 25 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", i)})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("GetStock %d with 100 ms left: %v, want the Guard's DEADLINE_EXCEEDED", i, err)
		}
	}
	if r.srv.Calls(getStock) != 0 {
		t.Fatalf("the handler ran %d GetStock; want none, each refused as too short", r.srv.Calls(getStock))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-ample", Sku: "a", Units: 1})
	st, _ := r.client.Runtime().BreakerState(reserveStock)
	if err != nil || st != runtime.StateClosed || r.srv.Calls(reserveStock) != 1 {
		t.Errorf("ReserveStock with 2 s left after one caller's too-short GetStocks: %v (breaker %v, server ran %d); want it served by the healthy server",
			err, st, r.srv.Calls(reserveStock))
	}
}
