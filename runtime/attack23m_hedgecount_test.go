package runtime_test

// The feature-pair matrix, hedging × the layers that refuse an attempt
// (the breaker, the adaptive limit, the throttler) × the metrics: the
// README's resilient_client_retries_total counts "hedged copies sent
// (hedge)"; a copy the client refused itself was not sent.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack23mBare takes the breaker, the adaptive layers and the bulkhead
// out of the inventory policy and gives it a budget with room for every
// repeat, so that each case adds only the layers it is about; it returns
// GetStock's method.
func attack23mBare(p *policy.Service) *policy.Method {
	p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead = nil, nil, nil, nil
	p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
	return atkMethod(p, atkGetStock)
}

// attack23mHedged edits the inventory policy to a hedged GetStock (a
// copy after 20 ms, up to 2, UNAVAILABLE fatal), nothing else in force.
func attack23mHedged(p *policy.Service) *policy.Method {
	m := attack23mBare(p)
	m.Retry = nil
	m.Timeout = 2 * time.Second
	m.Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 2}
	return m
}

// TestAttack23mHedgedCopyRefusedOnTheClientIsNotCountedSent: a hedged
// call whose first copy the server holds until the second copy has been
// decided, and whose second copy the client refuses: the adaptive limit
// (limit 1, the first copy in it) or the half-open breaker (one probe,
// the first copy's). The server sees one call, the caller gets its
// answer, and retries_total{outcome="hedge"} stays 0: no copy was sent
// beside the first. The breaker's refusal counts as the retry refused by
// the open breaker, as a retried call's does. With and without a
// grpc.Header option, which gives each copy options of its own.
func TestAttack23mHedgedCopyRefusedOnTheClientIsNotCountedSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *policy.Service)
		// open fails one call with UNAVAILABLE first, to open the breaker
		// (1 call, ratio 0.5), then moves the clock past its cool-down.
		open bool
		// refusal is the series that counts the second copy's refusal.
		refusal string
		want    map[string]float64
	}{
		{
			name: "by the adaptive limit",
			edit: func(p *policy.Service) {
				attack23mHedged(p)
				p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1,
					Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
			},
			refusal: "resilient_client_adaptive_rejections_total{method=GetStock}",
			want: map[string]float64{
				"resilient_client_attempts_total{code=OK,method=GetStock}":                   1,
				"resilient_client_adaptive_limit{limiter=shared}":                            1,
				"resilient_client_adaptive_rejections_total{method=GetStock}":                1,
				"resilient_client_throttle_refusal_probability{}":                            0,
				"resilient_client_retries_total{method=GetStock,outcome=hedge}":              0,
				"resilient_client_breaker_transitions_total{breaker=shared,state=open}":      0,
				"resilient_client_breaker_rejections_total{method=GetStock}":                 0,
				"resilient_client_retries_total{method=GetStock,outcome=breaker}":            0,
				"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}":          0,
				"resilient_client_breaker_transitions_total{breaker=shared,state=closed}":    0,
				"resilient_client_breaker_transitions_total{breaker=shared,state=half-open}": 0,
			},
		},
		{
			name: "by the half-open breaker",
			edit: func(p *policy.Service) {
				attack23mHedged(p)
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
					CoolDown: 10 * time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
			},
			open:    true,
			refusal: "resilient_client_breaker_rejections_total{method=GetStock}",
			want: map[string]float64{
				"resilient_client_attempts_total{code=OK,method=GetStock}":                   1,
				"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}":          1,
				"resilient_client_retries_total{method=GetStock,outcome=hedge}":              0,
				"resilient_client_retries_total{method=GetStock,outcome=breaker}":            1,
				"resilient_client_breaker_rejections_total{method=GetStock}":                 1,
				"resilient_client_breaker_transitions_total{breaker=shared,state=open}":      1,
				"resilient_client_breaker_transitions_total{breaker=shared,state=half-open}": 1,
				"resilient_client_breaker_transitions_total{breaker=shared,state=closed}":    1,
			},
		},
	} {
		for _, header := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, grpc.Header %v", tc.name, header), func(t *testing.T) {
				atkNoLeak(t)
				release := make(chan struct{})
				first := server.Behaviour(atkHold(release))
				if tc.open {
					first = server.Fail(codes.Unavailable)
				}
				srv, cc := startFault(t, faultserver.PerCall(first, atkHold(release)))
				reg := prometheus.NewRegistry()
				clock := newAtkClock()
				c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
					Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(clock)},
				}, tc.edit)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req := &inventoryv1.GetStockRequest{Sku: "apple"}
				calls := 0
				if tc.open {
					if _, err := c.GetStock(ctx, req); status.Code(err) != codes.Unavailable {
						t.Fatalf("the first call: %v, want UNAVAILABLE", err)
					}
					atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "breaker %v after the failure, want open")
					clock.Advance(11 * time.Second)
					calls = 1
				}
				done := make(chan error, 1)
				var opts []grpc.CallOption
				var md metadata.MD
				if header {
					opts = append(opts, grpc.Header(&md)) // each copy gets options of its own
				}
				go func() { _, err := c.GetStock(ctx, req, opts...); done <- err }()
				atkWaitFor(t, "the first copy at the server", func() bool { return srv.Calls(atkGetStock) == calls+1 })
				// The second copy is decided 20 ms after the first was sent:
				// refused at once by the client, it never reaches the server.
				atkWaitFor(t, "the second copy refused", func() bool { return atk22eSeries(t, reg)[tc.refusal] == 1 })
				close(release)
				if err := <-done; err != nil {
					t.Fatalf("the hedged call: %v, want the first copy's answer", err)
				}
				if n := srv.Calls(atkGetStock); n != calls+1 {
					t.Fatalf("the server saw %d calls, want %d", n, calls+1)
				}
				got := atk22eSeries(t, reg)
				for k, v := range tc.want {
					if got[k] != v {
						t.Errorf("%s = %v, want %v", k, got[k], v)
					}
				}
			})
		}
	}
}
