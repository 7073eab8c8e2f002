package runtime_test

// Attacks on "several clients may share one registerer" (README, "Metrics"
// and the WithRegisterer row of the runtime options): clients built at
// the same time, on a registerer that wraps the program's registry (the
// usual way to give a subsystem's metrics a label of its own), while
// other clients of the same dependency already call through it, and their
// accessors (Describe, Policy, Changes, BreakerState, BulkheadInUse) read
// while calls run.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack21aClientsBuiltConcurrentlyOnOneWrappedRegisterer: six
// inventory clients (with an adaptive limit and a throttler, so that
// their families register too) and a payments client are built at once
// on one prometheus.WrapRegistererWith registerer; each inventory client
// makes 20 calls as soon as it is built, while its accessors are read.
// Every client is built (none refused for a family another registered
// first), the counts add up to what the server saw, under the wrapper's
// label, and no permit is left counted.
func TestAttack21aClientsBuiltConcurrentlyOnOneWrappedRegisterer(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"subsystem": "shop"}, reg)
	opts := []runtime.Option{runtime.WithRegisterer(wrapped), runtime.WithPolicyFrom("attack21a", func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{}
		p.ClientThrottle = &policy.Throttle{}
		// A healthy server on a loaded machine: no attempt is cut.
		atkMethod(p, atkGetStock).Timeout = 5 * time.Second
	})}
	const clients, calls = 6, 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			<-start
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts}, nil)
			rt := c.Runtime()
			var readers sync.WaitGroup
			done := make(chan struct{})
			readers.Go(func() {
				for {
					select {
					case <-done:
						return
					case <-time.After(time.Millisecond):
					}
					if d := rt.Describe(); !strings.Contains(d, "adaptive_limit") || !strings.Contains(d, "(attack21a)") {
						t.Errorf("client %d: Describe shows no adaptive limit or its source:\n%s", i, d)
						return
					}
					if p := rt.Policy(); p.AdaptiveLimit == nil {
						t.Errorf("client %d: Policy has no adaptive limit", i)
					}
					if len(rt.Changes()) == 0 {
						t.Errorf("client %d: no Changes", i)
					}
					if s, ok := rt.BreakerState(atkGetStock); !ok || s != runtime.StateClosed {
						t.Errorf("client %d: breaker %v %v, want closed", i, s, ok)
					}
					if n, ok := rt.BulkheadInUse(atkGetStock); !ok || n < 0 || n > 8 {
						t.Errorf("client %d: %d permits of 8 in use (%v)", i, n, ok)
					}
				}
			})
			for range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
					t.Errorf("client %d: GetStock: %v", i, err)
				}
				cancel()
			}
			close(done)
			readers.Wait()
		})
	}
	wg.Go(func() {
		<-start
		p, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(wrapped)}})
		if err != nil {
			t.Errorf("the payments client on the shared registerer: %v", err)
			return
		}
		if _, err := p.Charge(context.Background(), &paymentsv1.ChargeRequest{OrderId: "o-1", AmountCents: 100}); err != nil {
			t.Errorf("Charge: %v", err)
		}
	})
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := srv.Calls(atkGetStock); n != clients*calls {
		t.Fatalf("the server saw %d GetStock, want %d", n, clients*calls)
	}
	wantMetric(t, reg, clients*calls, "resilient_client_attempts_total", "subsystem", "shop", "dependency", attack20bDep, "method", "GetStock", "code", "OK")
	wantMetric(t, reg, 1, "resilient_client_attempts_total", "subsystem", "shop", "dependency", paymentsv1.PaymentsServiceResilientPolicy.Name, "method", "Charge", "code", "OK")
	wantMetric(t, reg, 0, "resilient_client_bulkhead_in_use", "subsystem", "shop", "dependency", attack20bDep, "bulkhead", "shared")
	wantMetric(t, reg, 0, "resilient_client_throttle_refusal_probability", "subsystem", "shop", "dependency", attack20bDep)
	if l := metricValue(t, reg, "resilient_client_adaptive_limit", "subsystem", "shop", "dependency", attack20bDep, "limiter", "shared"); l < 1 || l > 8 {
		t.Errorf("adaptive_limit %v, want within [1, 8] (the bulkhead's permits)", l)
	}
}
