package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack23bOpenBreakerRefusesTheFirstCopyOnce: a hedged GetStock
// whose delay is the shortest there is (1 ns), against an open breaker:
// each call's first copy is refused, and its second copy is mostly
// decided before the first's refusal is read, then refused too. The
// first copy's refusal is a rejection, never a repeat refused
// (retries_total{outcome="breaker"} counts the second copies only), and
// the server sees nothing. Before, the first copy's refusal read after
// the second was decided counted as a repeat: 394 repeats of 397
// rejections over 200 calls.
func TestAttack23bOpenBreakerRefusesTheFirstCopyOnce(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Fail(codes.Unavailable))
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
	}, func(p *policy.Service) {
		m := attack23mHedged(p)
		m.Hedging.Delay = time.Nanosecond
		m.Hedging.MaxCopies = 2
		// Non-fatal: the call that opens the breaker waits for each copy
		// it sent to be answered, so that the server counted them all.
		m.Hedging.NonFatalCodes = policy.CodesOf(codes.Unavailable)
		p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 1000, Window: time.Minute}
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
			CoolDown: time.Hour, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err == nil {
		t.Fatal("the first call answered, want UNAVAILABLE")
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "breaker %v, want open")
	sent := srv.Calls(atkGetStock)
	base := atk22eSeries(t, reg)
	const calls = 200
	for i := range calls {
		if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: fmt.Sprint(i)}); !errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("call %d: %v, want ErrCircuitOpen", i, err)
		}
	}
	if n := srv.Calls(atkGetStock); n != sent {
		t.Errorf("the server saw %d calls more, want none", n-sent)
	}
	got := atk22eSeries(t, reg)
	d := func(k string) float64 { return got[k] - base[k] }
	rejected := d("resilient_client_breaker_rejections_total{method=GetStock}")
	repeats := d("resilient_client_retries_total{method=GetStock,outcome=breaker}")
	if rejected-repeats != calls || repeats > calls {
		t.Errorf("over %d calls refused by the open breaker: %v rejections, %v of them counted as a repeat refused "+
			"(retries_total{outcome=\"breaker\"}); want every first copy a rejection not counted a repeat, "+
			"and at most one repeat per call (the second copy, decided before the first's refusal was read)", calls, rejected, repeats)
	}
	if h := d("resilient_client_retries_total{method=GetStock,outcome=hedge}"); h != 0 {
		t.Errorf("retries_total{outcome=\"hedge\"} grew by %v, want 0: no copy was sent", h)
	}
}
