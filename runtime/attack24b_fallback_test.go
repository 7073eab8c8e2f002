package runtime_test

// The fallback × each refusal of a hedged call whose copies are 1 ns
// apart: README, Fallback: it runs when the call failed on the
// dependency's side or was refused by the runtime, receives the final
// error, and is counted under its cause; never for an answer nor for the
// caller's cancellation.

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
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack24bFallbackOfATinyHedgeGetsTheRefusal: ReserveStock (sent
// once) holds what the refusal needs (the rate limit's one token, the
// bulkhead's one permit, the adaptive limit's one place) at the server,
// or opened the breaker by failing. Then a hedged GetStock (3 copies,
// 1 ns apart) is refused: its fallback runs once, with the refusal's
// sentinel, counted under the refusal's cause; the server sees no
// GetStock. A GetStock the server answers NOT_FOUND gets no fallback.
func TestAttack24bFallbackOfATinyHedgeGetsTheRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(p *policy.Service)
		hold     bool
		sentinel error
		cause    string
	}{
		{"rate limit", func(p *policy.Service) {
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1}
		}, true, runtime.ErrRateLimited, "rate_limited"},
		{"bulkhead", func(p *policy.Service) {
			p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: time.Millisecond}
		}, true, runtime.ErrBulkheadFull, "bulkhead_full"},
		{"adaptive limit", func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1,
				Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
		}, true, runtime.ErrConcurrencyLimited, "concurrency_limited"},
		{"open breaker", func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
				CoolDown: time.Hour, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		}, false, runtime.ErrCircuitOpen, "circuit_open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
				switch {
				case c.Method != atkReserveStock:
					return status.Error(codes.NotFound, "no such sku")
				case tc.hold:
					select {
					case <-release:
					case <-ctx.Done():
					}
				}
				return status.Error(codes.Unavailable, "down")
			})
			reg := prometheus.NewRegistry()
			var got []error
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
				GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
					got = append(got, err)
					return &inventoryv1.GetStockResponse{Units: -1}, nil
				},
			}, func(p *policy.Service) {
				m := attack24bTinyHedge(p)
				m.Hedging.MaxCopies = 3
				p.Bulkhead = nil
				tc.edit(p)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			held := make(chan error, 1)
			go func() {
				_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{Sku: "apple", Units: 1})
				held <- err
			}()
			if !tc.hold {
				if err := <-held; status.Code(err) != codes.Unavailable {
					t.Fatalf("ReserveStock: %v, want UNAVAILABLE", err)
				}
			} else {
				atkWaitFor(t, "ReserveStock at the server", func() bool { return srv.Calls(atkReserveStock) == 1 })
			}
			resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			if tc.hold {
				close(release)
				<-held
			}
			if err != nil || resp.GetUnits() != -1 {
				t.Fatalf("GetStock: %v %v, want the fallback's answer", resp, err)
			}
			if len(got) != 1 || !errors.Is(got[0], tc.sentinel) {
				t.Fatalf("the fallback saw %v, want once an error matching %v", got, tc.sentinel)
			}
			if n := srv.Calls(atkGetStock); n != 0 {
				t.Errorf("the server saw %d GetStock calls, want none", n)
			}
			want := "resilient_client_fallbacks_total{cause=" + tc.cause + ",method=GetStock}"
			if v := atk22eSeries(t, reg)[want]; v != 1 {
				t.Errorf("%s = %v, want 1", want, v)
			}
			if tc.name == "open breaker" || tc.name == "rate limit" {
				return // the breaker, the spent token, refuse the call below too
			}
			got = nil
			if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "pear"}); status.Code(err) != codes.NotFound || len(got) != 0 {
				t.Errorf("an answered GetStock: %v, fallback saw %v; want NOT_FOUND and no fallback", err, got)
			}
		})
	}
}
