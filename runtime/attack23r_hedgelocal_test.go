package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack23rHedgedCopyRefusedByTheAdaptiveLimitSaysSo: README, Hedging:
// a further copy refused by an adaptive layer after the copies sent
// failed returns the last real error, matching ErrConcurrencyLimited.
// Copy 1 is held; copy 2 (after the delay) fails RESOURCE_EXHAUSTED, a
// drop that halves the limit 2 to 1; copy 3, sent at once, is refused
// (copy 1 holds the one place); copy 1 then fails RESOURCE_EXHAUSTED.
func TestAttack23rHedgedCopyRefusedByTheAdaptiveLimitSaysSo(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	held := func(ctx context.Context, c server.Call) error {
		select {
		case <-release:
			return status.Error(codes.ResourceExhausted, "copy 1 fails")
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	srv, cc := startFault(t, faultserver.PerCall(held, server.Fail(codes.ResourceExhausted)))
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
	}, func(p *policy.Service) {
		p.Breaker, p.ClientThrottle, p.Bulkhead = nil, nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 2, InitialLimit: 2,
			Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Timeout = 3 * time.Second
		m.Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.ResourceExhausted)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); done <- err }()
	atkWaitFor(t, "copy 3 refused", func() bool {
		return atk22eSeries(t, reg)["resilient_client_adaptive_rejections_total{method=GetStock}"] == 1
	})
	close(release)
	err := <-done
	if n := srv.Calls(atkGetStock); n != 2 {
		t.Errorf("the server saw %d calls, want 2", n)
	}
	var re *runtime.Error
	if !errors.Is(err, runtime.ErrConcurrencyLimited) || !errors.As(err, &re) || status.Code(re.Cause) != codes.ResourceExhausted {
		t.Errorf("the hedged call: %v, want the last RESOURCE_EXHAUSTED, matching ErrConcurrencyLimited", err)
	}
}
