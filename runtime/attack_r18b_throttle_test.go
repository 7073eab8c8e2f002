package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackR18BThrottleNeverRefusesMoreThanMaxRefusal: in a total
// outage the throttler's refusals are capped by max_refusal, from below as
// well as above: with a cap of 0.5, about half of 600 attempts still reach
// the dependency (the probes that will see its recovery), not a handful.
// Bounds at four standard deviations of the coin.
func TestAttackR18BThrottleNeverRefusesMoreThanMaxRefusal(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Fail(codes.Unavailable))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.ClientThrottle = &policy.Throttle{Window: time.Minute, MaxRefusal: 0.5}
	})
	const calls = 600
	throttled := 0
	for range calls {
		_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
		switch {
		case errors.Is(err, runtime.ErrThrottled):
			throttled++
		case status.Code(err) != codes.Unavailable:
			t.Fatalf("%v, want UNAVAILABLE or ErrThrottled", err)
		}
	}
	sent := srv.Calls(atkStockReport)
	if sent+throttled != calls {
		t.Errorf("%d sent + %d throttled != %d calls", sent, throttled, calls)
	}
	// The probability climbs to the cap within ~10 attempts, then each
	// attempt is refused with probability 0.5: 300 ± 4×12.
	if throttled > 350 || throttled < 240 {
		t.Errorf("%d of %d attempts throttled under max_refusal 0.5, want about 300 (240..350)", throttled, calls)
	}
	srv.SetBehaviour(server.Healthy)
	for i := range 40 {
		if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); err == nil {
			return
		} else if !errors.Is(err, runtime.ErrThrottled) {
			t.Fatalf("call %d after the recovery: %v", i, err)
		}
	}
	t.Error("no answer in 40 calls after the recovery (0.5^40 by chance)")
}
