package runtime_test

// Attack on a hedged call whose further copy the client refuses
// (e3bae73, 4178d50): the refusal before the first copy's failure, not
// after it, each layer that may refuse (the budget, the adaptive limit,
// the half-open breaker), with the metrics read after and the fallback's
// cause. README: hedged copies "come from the budget", stop at the open
// breaker; a repeat the client refused returns the last real error, which
// matches the refusal's sentinel; retries_total counts hedged copies sent
// (hedge) and each refusal under its outcome.

import (
	"context"
	"errors"
	"fmt"
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

// attack23bHeldThen holds a call until release is closed, then answers
// with err (nil: the answer).
func attack23bHeldThen(release <-chan struct{}, err error) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		select {
		case <-release:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestAttack23bHedgedCopyRefusedBeforeTheFirstFails: a hedged GetStock
// (a copy after 20 ms, UNAVAILABLE non-fatal) whose first copy the server
// holds; the client refuses the next copy while the first is in flight;
// then the first is released, failing with UNAVAILABLE (or answering).
// The call's error is the first copy's UNAVAILABLE as its cause, matching
// the refusal's sentinel; the fallback is counted under the refusal's
// cause; retries_total counts the refusal under its outcome and no copy
// under hedge but those sent. Last, a third copy refused by the budget
// after a second failed at once, while the first still runs: the first's
// answer is the call's, hedge counts the second.
func TestAttack23bHedgedCopyRefusedBeforeTheFirstFails(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "attack23b: the first copy failed")
	for _, tc := range []struct {
		name      string
		edit      func(p *policy.Service, m *policy.Method)
		open      bool  // open the breaker first, then pass its cool-down: the first copy is the probe
		first     error // the first copy's end once released
		second    server.Behaviour
		refusal   string // the series that counts the refusal, waited for
		sentinel  error  // nil: the call answers
		cause     string // the fallback's cause label
		want      map[string]float64
		wantCalls int
	}{
		{
			name: "budget", first: unavailable,
			edit: func(p *policy.Service, _ *policy.Method) {
				p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 0, Window: time.Minute}
			},
			refusal: "resilient_client_retries_total{method=GetStock,outcome=budget}", sentinel: runtime.ErrBudgetExhausted,
			cause: "budget_exhausted", wantCalls: 1,
			want: map[string]float64{
				"resilient_client_retries_total{method=GetStock,outcome=hedge}":     0,
				"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 1,
			},
		},
		{
			name: "adaptive limit", first: unavailable,
			edit: func(p *policy.Service, _ *policy.Method) {
				p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1,
					Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
			},
			refusal: "resilient_client_adaptive_rejections_total{method=GetStock}", sentinel: runtime.ErrConcurrencyLimited,
			cause: "concurrency_limited", wantCalls: 1,
			want: map[string]float64{
				"resilient_client_retries_total{method=GetStock,outcome=hedge}":     0,
				"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 1,
			},
		},
		{
			name: "half-open breaker", first: unavailable, open: true,
			edit: func(p *policy.Service, _ *policy.Method) {
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
					CoolDown: 10 * time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
			},
			refusal: "resilient_client_breaker_rejections_total{method=GetStock}", sentinel: runtime.ErrCircuitOpen,
			cause: "circuit_open", wantCalls: 2,
			want: map[string]float64{
				"resilient_client_retries_total{method=GetStock,outcome=hedge}":     0,
				"resilient_client_retries_total{method=GetStock,outcome=breaker}":   1,
				"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 1,
			},
		},
		{
			name: "budget after a second copy failed, the first answers", first: nil,
			second: server.Fail(codes.Unavailable),
			edit: func(p *policy.Service, m *policy.Method) {
				p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 1, Window: time.Minute}
				m.Hedging.MaxCopies = 3
			},
			refusal: "resilient_client_retries_total{method=GetStock,outcome=budget}", wantCalls: 2,
			want: map[string]float64{
				"resilient_client_retries_total{method=GetStock,outcome=hedge}":     1,
				"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 1,
				"resilient_client_attempts_total{code=OK,method=GetStock}":          1,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			behaviours := []server.Behaviour{attack23bHeldThen(release, tc.first)}
			if tc.open {
				behaviours = append([]server.Behaviour{server.Fail(codes.Unavailable)}, behaviours...)
			}
			if tc.second != nil {
				behaviours = append(behaviours, tc.second)
			}
			behaviours = append(behaviours, server.Fail(codes.Internal)) // a copy the test did not expect
			srv, cc := startFault(t, faultserver.PerCall(behaviours...))
			reg := prometheus.NewRegistry()
			clock := newAtkClock()
			var fellBack error
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(clock)},
				GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
					fellBack = err
					return &inventoryv1.GetStockResponse{Units: -1}, nil
				},
			}, func(p *policy.Service) {
				m := attack23mHedged(p)
				m.Hedging.NonFatalCodes = policy.CodesOf(codes.Unavailable)
				tc.edit(p, m)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := &inventoryv1.GetStockRequest{Sku: "apple"}
			before := 0
			if tc.open {
				if resp, err := c.GetStock(ctx, req); err != nil || resp.GetUnits() != -1 {
					t.Fatalf("the call that opens the breaker: %v %v, want the fallback's", resp, err)
				}
				atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "breaker %v after the failure, want open")
				clock.Advance(11 * time.Second)
				before = 1
			}
			fellBack = nil
			base := atk22eSeries(t, reg) // the series count this call's from here
			type result struct {
				resp *inventoryv1.GetStockResponse
				err  error
			}
			done := make(chan result, 1)
			go func() { r, err := c.GetStock(ctx, req); done <- result{r, err} }()
			atkWaitFor(t, "the first copy at the server", func() bool { return srv.Calls(atkGetStock) >= before+1 })
			atkWaitFor(t, "the next copy refused", func() bool { return atk22eSeries(t, reg)[tc.refusal]-base[tc.refusal] == 1 })
			close(release)
			r := <-done
			if r.err != nil {
				t.Fatalf("the hedged call: %v, want an answer (the fallback's or the first copy's)", r.err)
			}
			if n := srv.Calls(atkGetStock); n != tc.wantCalls {
				t.Errorf("the server saw %d calls, want %d", n, tc.wantCalls)
			}
			got := atk22eSeries(t, reg)
			if tc.sentinel == nil {
				if r.resp.GetUnits() != 42 || fellBack != nil {
					t.Errorf("the call answered %v (the fallback saw %v), want the first copy's answer", r.resp, fellBack)
				}
			} else {
				var re *runtime.Error
				if r.resp.GetUnits() != -1 || !errors.Is(fellBack, tc.sentinel) || !errors.As(fellBack, &re) || status.Code(re.Cause) != codes.Unavailable {
					t.Errorf("the fallback saw %v (answer %v), want a *runtime.Error matching %v, caused by the first copy's UNAVAILABLE", fellBack, r.resp, tc.sentinel)
				}
				key := fmt.Sprintf("resilient_client_fallbacks_total{cause=%s,method=GetStock}", tc.cause)
				if got[key]-base[key] != 1 {
					t.Errorf("%s grew by %v, want 1", key, got[key]-base[key])
				}
			}
			for k, v := range tc.want {
				if got[k]-base[k] != v {
					t.Errorf("%s grew by %v in the hedged call, want %v", k, got[k]-base[k], v)
				}
			}
			if got[tc.refusal]-base[tc.refusal] != 1 {
				t.Errorf("%s grew by %v, want 1", tc.refusal, got[tc.refusal]-base[tc.refusal])
			}
		})
	}
}
