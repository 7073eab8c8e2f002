package runtime_test

// Attacks on the bounds a server's positive pushback is held to (README,
// "Pushback": "a positive value replaces the backoff, still within the
// retry budget ...; a value longer than the call's time left ends the
// retries with the last error at once"), where "the call's time left" is
// the method's overall_timeout, the caller's context having no deadline
// (README, "Deadlines": "With overall_timeout, the call's limit is the
// earlier of the two").

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack29BPushbackPastTheBudgetOrTheOverallLimitEndsAtOnce: GetStock
// fails UNAVAILABLE with a pushback, against callers whose context has
// no deadline and may be cancelled only by the test's 2 s guard:
//   - retried (3 attempts), pushback 300 ms, a budget with no retry to
//     give: the retry is refused before the pause, so the call ends at
//     once (well before the 300 ms), after 1 attempt, with the server's
//     UNAVAILABLE matching ErrBudgetExhausted;
//   - retried, and hedged (3 copies, UNAVAILABLE non-fatal), pushback
//     10 s, overall_timeout 400 ms, a generous budget: the pushback ends
//     past the call's limit, so the call ends at once, after 1 attempt,
//     with the server's UNAVAILABLE (not DEADLINE_EXCEEDED at 400 ms, not
//     10 s later).
func TestAttack29BPushbackPastTheBudgetOrTheOverallLimitEndsAtOnce(t *testing.T) {
	atkNoLeak(t)
	const soon = 200 * time.Millisecond // "at once", on a loaded machine
	for _, tc := range []struct {
		name     string
		pushback string
		hedged   bool
		budget   policy.Budget
		overall  time.Duration
		sentinel error // nil: the bare server's error
	}{
		{"retried, no budget", "300", false, policy.Budget{Ratio: 0.01, MinRetries: 0, Window: time.Minute}, 0, runtime.ErrBudgetExhausted},
		{"retried, past the overall limit", "10000", false, policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}, 400 * time.Millisecond, nil},
		{"hedged, past the overall limit", "10000", true, policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}, 400 * time.Millisecond, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, cc := startFault(t, atkPushback(tc.pushback))
			readyConn(t, cc)
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
				p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
				b := tc.budget
				p.Budget = &b
				m := atkMethod(p, atkGetStock)
				m.Timeout, m.OverallTimeout = 300*time.Millisecond, tc.overall
				m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
					Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
				if tc.hedged {
					m.Retry = nil
					m.Hedging = &policy.Hedging{Delay: 200 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			guard := time.AfterFunc(2*time.Second, cancel) // no deadline the runtime can read
			defer guard.Stop()
			start := time.Now()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			took := time.Since(start)
			if n := fs.Calls(atkGetStock); n != 1 {
				t.Errorf("the server saw %d calls, want 1", n)
			}
			if status.Code(err) != codes.Unavailable || tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("got %v, want the server's UNAVAILABLE (matching %v)", err, tc.sentinel)
			}
			if took > soon {
				t.Errorf("the call took %v with a pushback of %s ms, want at once (under %v)", took, tc.pushback, soon)
			}
		})
	}
}
