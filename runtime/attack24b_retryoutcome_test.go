package runtime_test

// Retries and hedged copies × the adaptive layers (the client-side
// throttler, the adaptive concurrency limit) × the metrics: README,
// Observability: resilient_client_retries_total counts each retry made or
// not made under the outcome that says why. A repeat (a retry, or a hedged
// copy after the first) that an adaptive layer refuses was decided and
// not made: it counts under outcome "throttler" or "adaptive_limit", as
// one the open breaker refuses counts under "breaker"; a first attempt or
// first copy they refuse is no repeat and counts under none.

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

// attack24bRepeats are the two ways a call repeats itself: retried (2
// attempts, UNAVAILABLE retryable, 1 ms backoff) or hedged (2 copies, a
// second after 1 s or at once after a non-fatal UNAVAILABLE).
var attack24bRepeats = []struct {
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

// TestAttack24bRepeatRefusedByTheAdaptiveLimitIsCounted: the adaptive
// limit is 2 (1 at least). Call A is held at the server; call B fails
// RESOURCE_EXHAUSTED, a drop that halves the limit to 1, which A holds:
// B's retry (or second copy) is refused at once. The server sees 2 calls;
// B gets the RESOURCE_EXHAUSTED matching ErrConcurrencyLimited; retries_total
// counts B's repeat under "adaptive_limit", no retry made nor hedge
// sent; and the budget, charged for a retry that was never sent, has
// it back.
func TestAttack24bRepeatRefusedByTheAdaptiveLimitIsCounted(t *testing.T) {
	for _, rp := range attack24bRepeats {
		t.Run(rp.name, func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			srv, cc := startFault(t, faultserver.PerCall(atkHold(release), server.Fail(codes.ResourceExhausted)))
			reg := prometheus.NewRegistry()
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
			}, func(p *policy.Service) {
				m := attack23mBare(p)
				m.Timeout = 3 * time.Second
				rp.edit(m)
				// RESOURCE_EXHAUSTED, the drop (an UNAVAILABLE is not one).
				if m.Retry != nil {
					m.Retry.RetryableCodes = policy.CodesOf(codes.ResourceExhausted)
				} else {
					m.Hedging.NonFatalCodes = policy.CodesOf(codes.ResourceExhausted)
				}
				p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 5, Window: time.Minute}
				p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 2, InitialLimit: 2,
					Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
			})
			m := c.Runtime().MethodNamed24b(atkGetStock)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a := make(chan error, 1)
			go func() { _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "held"}); a <- err }()
			atkWaitFor(t, "call A at the server", func() bool { return srv.Calls(atkGetStock) == 1 })
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			var re *runtime.Error
			if !errors.Is(err, runtime.ErrConcurrencyLimited) || !errors.As(err, &re) || status.Code(re.Cause) != codes.ResourceExhausted {
				t.Errorf("call B: %v, want the server's RESOURCE_EXHAUSTED matching ErrConcurrencyLimited", err)
			}
			close(release)
			if err := <-a; err != nil {
				t.Fatalf("call A: %v", err)
			}
			if n := srv.Calls(atkGetStock); n != 2 {
				t.Errorf("the server saw %d calls, want 2", n)
			}
			// 5 + 0.01 × 2 requests: B's repeat, refused, took nothing.
			if got := m.BudgetAvailable24b(); got != 5 {
				t.Errorf("the budget allows %d retries, want 5: charged for a repeat never sent", got)
			}
			atk22eWantSeries(t, reg, map[string]float64{
				"resilient_client_attempts_total{code=OK,method=GetStock}":                 1,
				"resilient_client_attempts_total{code=RESOURCE_EXHAUSTED,method=GetStock}": 1,
				"resilient_client_adaptive_limit{limiter=shared}":                          1,
				"resilient_client_adaptive_rejections_total{method=GetStock}":              1,
				"resilient_client_retries_total{method=GetStock,outcome=adaptive_limit}":   1,
			}, "a repeat refused by the adaptive limit")
		})
	}
}

// TestAttack24bRepeatRefusedByTheThrottlerIsCounted: the server fails
// every GetStock with UNAVAILABLE; the throttler (k 2, a minute's window
// on a clock that does not move) soon refuses 9 attempts in 10. Over 200
// calls, each either has its first attempt refused (ErrThrottled, no
// cause), or sent and then its repeat refused (ErrThrottled with the
// server's UNAVAILABLE as cause), or made (the repeat's UNAVAILABLE). The
// repeats refused are counted under retries_total{outcome="throttler"},
// one for each, the repeats made under "made" (or "hedge"); the server
// saw the first attempts sent and the repeats made, nothing else; the
// budget was charged for the repeats made only.
func TestAttack24bRepeatRefusedByTheThrottlerIsCounted(t *testing.T) {
	for _, rp := range attack24bRepeats {
		t.Run(rp.name, func(t *testing.T) {
			atkNoLeak(t)
			srv, cc := startFault(t, server.Fail(codes.Unavailable))
			reg := prometheus.NewRegistry()
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithClock(newAtkClock())},
			}, func(p *policy.Service) {
				m := attack23mBare(p)
				m.Timeout = 3 * time.Second
				rp.edit(m)
				p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 1000, Window: time.Minute}
				p.ClientThrottle = &policy.Throttle{K: 2, Window: time.Minute, MaxRefusal: 0.9}
			})
			m := c.Runtime().MethodNamed24b(atkGetStock)
			before := m.BudgetAvailable24b()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const calls = 200
			firstRefused, repeatRefused, repeatFailed := 0, 0, 0
			for i := range calls {
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				var re *runtime.Error
				switch {
				case errors.Is(err, runtime.ErrThrottled) && errors.As(err, &re) && re.Cause == nil:
					firstRefused++
				case errors.Is(err, runtime.ErrThrottled) && errors.As(err, &re) && status.Code(re.Cause) == codes.Unavailable:
					repeatRefused++
				case status.Code(err) == codes.Unavailable && !errors.Is(err, runtime.ErrThrottled):
					repeatFailed++
				default:
					t.Fatalf("call %d: %v, want UNAVAILABLE, throttled or not", i, err)
				}
			}
			if repeatRefused == 0 {
				t.Fatalf("no repeat refused by the throttler over %d calls (%d first attempts refused): the test proves nothing", calls, firstRefused)
			}
			got := atk22eSeries(t, reg)
			made := "resilient_client_retries_total{method=GetStock,outcome=made}"
			if rp.name == "hedged" {
				made = "resilient_client_retries_total{method=GetStock,outcome=hedge}"
			}
			if v := got["resilient_client_retries_total{method=GetStock,outcome=throttler}"]; v != float64(repeatRefused) {
				t.Errorf("retries_total{outcome=\"throttler\"} = %v, want %d: the repeats the throttler refused", v, repeatRefused)
			}
			if v := got[made]; v != float64(repeatFailed) {
				t.Errorf("%s = %v, want %d", made, v, repeatFailed)
			}
			if v := got["resilient_client_throttled_total{method=GetStock}"]; v != float64(firstRefused+repeatRefused) {
				t.Errorf("throttled_total = %v, want %d", v, firstRefused+repeatRefused)
			}
			sent := calls - firstRefused + repeatFailed
			if n := srv.Calls(atkGetStock); n != sent {
				t.Errorf("the server saw %d calls, want %d (first attempts sent and repeats made)", n, sent)
			}
			// Each call whose first attempt was sent is a request (0.01
			// each, rounded down), each repeat made a retry.
			want := before - repeatFailed + (calls-firstRefused)/100
			if a := m.BudgetAvailable24b(); a != want {
				t.Errorf("the budget allows %d retries, want %d: %d repeats made, %d refused and never sent", a, want, repeatFailed, repeatRefused)
			}
		})
	}
}
