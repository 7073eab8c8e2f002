package runtime_test

// Attacks on what a call that used every attempt its policy allows
// returns when the server's last word is "do not retry" (README,
// "Errors": "When every attempt (or hedged copy) the policy allows was
// made and each failed transiently, the error ... matching
// runtime.ErrRetriesExhausted"; "Pushback": a negative value "stops the
// retries and returns the error").

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk29bLastSays fails every call UNAVAILABLE; the third, and only the
// third, also carries grpc-retry-pushback-ms: v.
func atk29bLastSays(v string) server.Behaviour {
	return func(ctx context.Context, c server.Call) error {
		if c.N == 3 {
			if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, v)); err != nil {
				return err
			}
		}
		return status.Errorf(codes.Unavailable, "injected, call %d", c.N)
	}
}

// TestAttack29BLastAttemptsDoNotRetryStillExhaustsTheRetries: a retried
// method of 3 attempts, and a hedged one of 3 copies, whose three
// attempts (copies) all fail with UNAVAILABLE, the third with a pushback
// of -1 (do not retry) or of 10 s (longer than the 3 s the call has
// left). The pushback stops nothing (no attempt is left to stop): every
// attempt the policy allows was made and each failed transiently, so the
// error must match ErrRetriesExhausted, as it does when the third says
// nothing (the control, which must hold for the test to mean anything).
// It is also what runtime/server's Guard reads to mark its own failure
// do-not-retry (shouldMark): a bare UNAVAILABLE is not marked unless the
// handler's call went through ClientInterceptor, and the Guard's caller
// retries a call that was already retried below.
func TestAttack29BLastAttemptsDoNotRetryStillExhaustsTheRetries(t *testing.T) {
	atkNoLeak(t)
	for _, mode := range []string{"retried", "hedged"} {
		for _, last := range []string{"", "-1", "10000"} {
			t.Run(mode+", the last pushback "+last, func(t *testing.T) {
				b := server.Fail(codes.Unavailable)
				if last != "" {
					b = atk29bLastSays(last)
				}
				fs, cc := startFault(t, b)
				readyConn(t, cc)
				c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
					p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
					p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
					m := atkMethod(p, atkGetStock)
					m.Timeout, m.OverallTimeout = 2*time.Second, 0
					if mode == "retried" {
						m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
							Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
					} else {
						m.Retry = nil
						m.Hedging = &policy.Hedging{Delay: time.Second, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				if n := fs.Calls(atkGetStock); n != 3 {
					t.Fatalf("the server saw %d calls, want the 3 the policy allows", n)
				}
				if status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrRetriesExhausted) {
					t.Errorf("3 of 3 failed UNAVAILABLE, the last with pushback %q: got %v (matches ErrRetriesExhausted: %v), "+
						"want UNAVAILABLE matching ErrRetriesExhausted", last, err, errors.Is(err, runtime.ErrRetriesExhausted))
				}
			})
		}
	}
}
