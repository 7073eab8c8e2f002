package runtime_test

// The feature-pair matrix, retries and hedging × the layers that refuse
// the repeat (the retry budget, the open breaker) × the fallback and its
// metrics: a call whose first attempt failed transiently and whose next
// attempt (or hedged copy) the client refused returns the last real
// error, which also matches the refusal's sentinel (README, Retries: "A
// retry refused by the budget returns the last real error, which also
// matches runtime.ErrBudgetExhausted"; an open breaker "is a final
// answer"). Hedged copies "come from the budget" and stop at the open
// breaker: a hedged call refused so says the same as a retried one.

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

// TestAttack23mRefusedRepeatSaysWhoRefused: the server fails every
// GetStock with UNAVAILABLE. A retried (2 attempts) or hedged (2 copies,
// UNAVAILABLE non-fatal) GetStock makes its first attempt; the second is
// refused by a budget with no retry to give, or by the breaker the first
// failure opened (minimum 1 call). The server sees one call; the caller's
// error keeps the server's UNAVAILABLE as its cause, matches the
// refusal's sentinel, and the fallback (which sees it) is counted under
// the refusal's cause.
func TestAttack23mRefusedRepeatSaysWhoRefused(t *testing.T) {
	type refusal struct {
		name     string
		edit     func(p *policy.Service)
		sentinel error
		cause    string
	}
	refusals := []refusal{
		{"by the budget", func(p *policy.Service) {
			p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 0, Window: time.Minute}
		}, runtime.ErrBudgetExhausted, "budget_exhausted"},
		{"by the breaker", func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
				CoolDown: 10 * time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		}, runtime.ErrCircuitOpen, "circuit_open"},
	}
	repeats := []struct {
		name string
		edit func(m *policy.Method)
	}{
		{"retried", func(m *policy.Method) {
			m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
				Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		}},
		{"hedged", func(m *policy.Method) {
			m.Retry = nil
			m.Hedging = &policy.Hedging{Delay: time.Second, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		}},
	}
	for _, rp := range repeats {
		for _, rf := range refusals {
			t.Run(rp.name+" "+rf.name, func(t *testing.T) {
				atkNoLeak(t)
				srv, cc := startFault(t, server.Fail(codes.Unavailable))
				reg := prometheus.NewRegistry()
				var fellBack error
				c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
					Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
					GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
						fellBack = err
						return &inventoryv1.GetStockResponse{Units: -1}, nil
					},
				}, func(p *policy.Service) {
					m := attack23mBare(p)
					m.Timeout = 2 * time.Second
					rp.edit(m)
					rf.edit(p)
				})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				if err != nil || resp.GetUnits() != -1 {
					t.Fatalf("GetStock: %v %v, want the fallback's answer", resp, err)
				}
				if n := srv.Calls(atkGetStock); n != 1 {
					t.Fatalf("the server saw %d calls, want 1 (the repeat refused)", n)
				}
				var re *runtime.Error
				if !errors.Is(fellBack, rf.sentinel) || !errors.As(fellBack, &re) {
					t.Errorf("the fallback saw %v, want a *runtime.Error matching %v", fellBack, rf.sentinel)
				}
				if re != nil && status.Code(re.Cause) != codes.Unavailable {
					t.Errorf("the fallback's error %v has cause %v, want the server's UNAVAILABLE", fellBack, re.Cause)
				}
				want := "resilient_client_fallbacks_total{cause=" + rf.cause + ",method=GetStock}"
				if got := atk22eSeries(t, reg)[want]; got != 1 {
					t.Errorf("%s = %v, want 1 (series: %v)", want, got, atk22eSeries(t, reg))
				}
			})
		}
	}
}

// TestAttack23mPushbackPastTheDeadlineIsCountedRetried and hedged alike:
// the server fails GetStock with UNAVAILABLE and a pushback of 10 s; the
// caller has 3 s. A retried (2 attempts) or hedged (2 copies, UNAVAILABLE
// non-fatal) call makes one attempt and returns the UNAVAILABLE at once,
// and retries_total counts the repeat not made under "deadline" (the
// pushback would end past it), as the README's metrics table says.
func TestAttack23mPushbackPastTheDeadlineIsCountedRetriedAndHedged(t *testing.T) {
	for _, hedged := range []bool{false, true} {
		t.Run(map[bool]string{false: "retried", true: "hedged"}[hedged], func(t *testing.T) {
			atkNoLeak(t)
			srv, cc := startFault(t, atkPushback("10000"))
			reg := prometheus.NewRegistry()
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
			}, func(p *policy.Service) {
				m := attack23mBare(p)
				m.Timeout = 2 * time.Second
				m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
					Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
				if hedged {
					m.Retry = nil
					m.Hedging = &policy.Hedging{Delay: time.Second, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
				}
			})
			begin := time.Now() // before the deadline is set: the bound below is the deadline's
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			if status.Code(err) != codes.Unavailable || time.Since(begin) > 2500*time.Millisecond {
				t.Fatalf("GetStock: %v after %v, want the UNAVAILABLE at once", err, time.Since(begin))
			}
			if n := srv.Calls(atkGetStock); n != 1 {
				t.Fatalf("the server saw %d calls, want 1", n)
			}
			want := map[string]float64{
				"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 1,
				"resilient_client_retries_total{method=GetStock,outcome=deadline}":  1,
			}
			atk22eWantSeries(t, reg, want, "a call whose pushback ends past its deadline")
		})
	}
}
