package runtime_test

// Attacks on hedging (README, "Hedging") against a server that resets
// every connection as each copy arrives: each copy fails UNAVAILABLE
// (non-fatal), which sends the next at once; the copies stop at
// max_copies, come from the retry budget, and the call ends with
// ErrRetriesExhausted, long before the hedging delay.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack21aHedgeAgainstAResettingServer: StockReport hedged with a
// 10 s delay and 3 copies; every copy's connection is reset under it.
// The server sees exactly 3 copies per call (copies wait for the
// connection to come back, WaitForReady, so that none fails before
// reaching it), the call returns ErrRetriesExhausted with the code
// UNAVAILABLE well before the delay, 2 hedges are counted per call, and
// the breaker (minimum_calls 100) counted each copy, but stays closed.
func TestAttack21aHedgeAgainstAResettingServer(t *testing.T) {
	atkNoLeak(t)
	srv, err := faultserver.Start(nil, runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.SetBehaviour(srv.Reset())
	cc := dialFault(t, srv.Addr())
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, func(p *policy.Service) {
		p.Breaker = breakerPolicy(100, 1)
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
		m := atkMethod(p, atkStockReport)
		m.Timeout = 20 * time.Second
		m.Hedging = &policy.Hedging{Delay: 10 * time.Second, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	const calls = 3
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
		start := time.Now()
		_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"}, waitForReady())
		took := time.Since(start)
		cancel()
		if !errors.Is(err, runtime.ErrRetriesExhausted) || status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want ErrRetriesExhausted with UNAVAILABLE", i+1, err)
		}
		if took > 5*time.Second {
			t.Errorf("call %d took %v: the non-fatal copies waited for the 10s delay", i+1, took)
		}
	}
	if n := srv.Calls(atkStockReport); n != 3*calls {
		t.Errorf("the server saw %d copies, want %d (3 per call)", n, 3*calls)
	}
	wantMetric(t, reg, 2*calls, "resilient_client_retries_total", "dependency", attack20bDep, "method", "StockReport", "outcome", "hedge")
	wantMetric(t, reg, 3*calls, "resilient_client_attempts_total", "dependency", attack20bDep, "method", "StockReport", "code", "UNAVAILABLE")
	atkWantBreaker(t, c.Runtime(), atkStockReport, runtime.StateClosed, "9 failures under minimum_calls 100 left the breaker %v, want closed")
	atkWantNoPermits(t, c.Runtime(), atkStockReport, "after the hedged calls")
}
