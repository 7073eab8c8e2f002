package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestCachedOneAttemptTimeoutIsADrop: a cached method of one attempt
// (GetStock with its cache, a 50ms timeout, no retry) under an adaptive
// limit, against a hung server. Its shared call was limited to that same
// timeout, so the attempt never had a context of its own, its end was
// taken for the call's deadline, and the limit stayed at 16 through 48
// timeouts. Now the attempt's own timeout cuts it: the limit halves per
// burst, and the error names the attempt's timeout.
func TestCachedOneAttemptTimeoutIsADrop(t *testing.T) {
	_, cc := startFault(t, server.Hang)
	reg := prometheus.NewRegistry()
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
		runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker, p.Bulkhead, p.RateLimit = nil, nil, nil
			p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 16, MaxLimit: 16}
			m := &p.Methods[0]
			m.Timeout, m.OverallTimeout, m.Retry, m.RateLimit = 50*time.Millisecond, 0, nil, nil
			if m.Cache == nil {
				t.Fatal("GetStock has no cache in the annotated policy")
			}
		}),
		runtime.WithRegisterer(reg),
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range 3 {
		var wg sync.WaitGroup
		for range 16 {
			n++
			sku := fmt.Sprintf("sku-%d", n) // a miss each: no call shared
			wg.Go(func() {
				_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: sku})
				if err != nil && !errors.Is(err, runtime.ErrAttemptTimeout) && !errors.Is(err, runtime.ErrConcurrencyLimited) {
					t.Errorf("cached call on a hung server: %v, want its attempt's timeout or a refusal", err)
				}
			})
		}
		wg.Wait()
	}
	if l := gaugeValue(t, reg, "resilient_client_adaptive_limit"); l > 4 {
		t.Errorf("limit %v after three bursts of 16 cached misses on a hung server, want it halved per burst (at most 4)", l)
	}
}
