package runtime_test

// The feature-pair matrix, the cache's stale answer × each refusal of the
// runtime × the fallback, the metrics and OnFinish: "When that call fails
// on the dependency's side or is refused by the runtime (breaker open,
// bulkhead full, rate limited) and an answer younger than stale_ttl is
// kept, that answer is returned, counted in
// resilient_client_fallbacks_total{cause="stale_cache"} … only a key with
// no such answer fails (and then reaches the fallback, if any)".

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack23mStaleAnswerStandsForEveryRefusal: GetStock cached (fresh
// 1 s, stale 1 min, on a fake clock); its first call is answered and
// kept, then the clock moves 2 s. The next call is refused by the
// runtime: the bulkhead's one permit held by a ReserveStock, the rate
// limit's one token spent, the adaptive limit of 1 held by a
// ReserveStock. It gets the kept answer, the fallback is not called, the
// server sees no second GetStock, the lookup counts stale and the
// fallbacks stale_cache once; OnFinish runs once with nil. A key with no
// kept answer, refused alike, reaches the fallback, under the refusal's
// cause.
func TestAttack23mStaleAnswerStandsForEveryRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(p *policy.Service)
		hold     bool // a ReserveStock in flight holds the permit or the place
		sentinel error
		cause    string
	}{
		{"bulkhead full", func(p *policy.Service) {
			p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: time.Millisecond}
		}, true, runtime.ErrBulkheadFull, "bulkhead_full"},
		{"rate limited", func(p *policy.Service) {
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1}
		}, false, runtime.ErrRateLimited, "rate_limited"},
		{"concurrency limited", func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1,
				Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
		}, true, runtime.ErrConcurrencyLimited, "concurrency_limited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
				if c.Method == atkReserveStock {
					return atkHold(release)(ctx, c)
				}
				return nil
			})
			reg := prometheus.NewRegistry()
			clock := newAtkClock()
			var fellBack atomic.Int32
			var fallbackErr atomic.Value
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(clock)},
				GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
					fellBack.Add(1)
					fallbackErr.Store(err)
					return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
				},
			}, func(p *policy.Service) {
				p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead = nil, nil, nil, nil
				m := atkMethod(p, atkGetStock)
				m.Timeout, m.Retry = time.Second, nil
				m.Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"sku"}}
				r := atkMethod(p, atkReserveStock)
				r.Timeout, r.Retry = 5*time.Second, nil
				tc.edit(p)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			first, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			if err != nil {
				t.Fatalf("the first GetStock: %v", err)
			}
			clock.Advance(2 * time.Second)
			held := make(chan error, 1)
			if tc.hold {
				go func() {
					_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "a", Units: 1})
					held <- err
				}()
				atkWaitFor(t, "ReserveStock in flight", func() bool { return srv.Calls(atkReserveStock) == 1 })
			}
			var f attack22aFinishes
			got, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, f.option())
			if err != nil || got.GetUnits() != first.GetUnits() || got.GetUnits() < 0 {
				t.Errorf("GetStock refused with a stale answer kept: %v %v, want the kept answer (%d units)", got, err, first.GetUnits())
			}
			f.wantOnce(t, "a call answered stale", codes.OK)
			if n := fellBack.Load(); n != 0 {
				t.Errorf("the fallback ran %d times for a call a stale answer stood for", n)
			}
			// A key with no kept answer, refused alike: the fallback.
			var g attack22aFinishes
			other, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "pear"}, g.option())
			if err != nil || other.GetUnits() != -1 || fellBack.Load() != 1 {
				t.Errorf("a key with nothing kept, refused: %v %v (fallback ran %d), want the fallback's answer", other, err, fellBack.Load())
			}
			if e, _ := fallbackErr.Load().(error); !errors.Is(e, tc.sentinel) {
				t.Errorf("the fallback saw %v, want %v", e, tc.sentinel)
			}
			g.wantOnce(t, "a call answered by the fallback", codes.OK)
			if n := srv.Calls(atkGetStock); n != 1 {
				t.Errorf("the server saw %d GetStock, want 1 (the others refused)", n)
			}
			if tc.hold {
				close(release)
				if err := <-held; err != nil {
					t.Errorf("ReserveStock: %v", err)
				}
			}
			s := atk22eSeries(t, reg)
			for k, v := range map[string]float64{
				"resilient_client_cache_lookups_total{method=GetStock,result=stale}":       1,
				"resilient_client_cache_lookups_total{method=GetStock,result=miss}":        2,
				"resilient_client_fallbacks_total{cause=stale_cache,method=GetStock}":      1,
				"resilient_client_fallbacks_total{cause=" + tc.cause + ",method=GetStock}": 1,
				"resilient_client_attempts_total{code=OK,method=GetStock}":                 1,
				"resilient_client_bulkhead_in_use{bulkhead=shared}":                        0,
			} {
				if s[k] != v {
					t.Errorf("%s = %v, want %v", k, s[k], v)
				}
			}
			atkWaitFor(t, "no permit held", func() bool {
				n, ok := c.Runtime().BulkheadInUse(atkGetStock)
				return !ok || n == 0
			})
		})
	}
}
