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
