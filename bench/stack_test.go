package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// stackPolicy is the full stack around one idempotent method: a bulkhead
// with more permits than any run takes, a closed circuit breaker, the retry
// budget, three attempts and a per-attempt timeout of one second.
func stackPolicy() *policy.Service {
	return &policy.Service{
		Name:   "example.inventory.v1.InventoryService",
		Budget: &policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second},
		Breaker: &policy.Breaker{
			FailureRatio:   0.5,
			MinimumCalls:   20,
			Window:         10 * time.Second,
			CoolDown:       2 * time.Second,
			HalfOpenProbes: 3,
			FailureCodes:   policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded),
		},
		Bulkhead: &policy.Bulkhead{Permits: 1 << 20, MaxWait: 50 * time.Millisecond},
		Methods: []policy.Method{{
			Name:       method,
			Kind:       policy.KindUnary,
			Idempotent: true,
			Timeout:    time.Second,
			Retry: &policy.Retry{
				MaxAttempts:    3,
				InitialBackoff: 50 * time.Millisecond,
				MaxBackoff:     200 * time.Millisecond,
				Multiplier:     2,
				RetryableCodes: policy.CodesOf(codes.Unavailable),
			},
		}},
	}
}

// failsafeStack is the same stack in failsafe-go, outside in as the
// runtime layers it: bulkhead, retry (with failsafe's retry budget, which
// bounds the share of retries in flight rather than over a window), circuit
// breaker, per-attempt timeout. It is built once, as a program would.
func failsafeStack() failsafe.Executor[*inventoryv1.GetStockResponse] {
	type R = *inventoryv1.GetStockResponse
	code := func(cs ...codes.Code) func(R, error) bool {
		return func(_ R, err error) bool {
			c := status.Code(err)
			for _, x := range cs {
				if c == x {
					return true
				}
			}
			return false
		}
	}
	bh := bulkhead.NewBuilder[R](1 << 20).WithMaxWaitTime(50 * time.Millisecond).Build()
	rp := retrypolicy.NewBuilder[R]().
		WithMaxAttempts(3).
		WithBackoff(50*time.Millisecond, 200*time.Millisecond).
		HandleIf(code(codes.Unavailable)).
		WithBudget(budget.NewBuilder().WithMaxRate(0.1).WithMinConcurrency(10).Build()).
		ReturnLastFailure().
		Build()
	cb := circuitbreaker.NewBuilder[R]().
		WithFailureRateThreshold(0.5, 20, 10*time.Second).
		WithDelay(2 * time.Second).
		WithSuccessThreshold(3).
		HandleIf(code(codes.Unavailable, codes.DeadlineExceeded)).
		Build()
	to := timeout.New[R](time.Second)
	return failsafe.With[R](bh, rp, cb, to)
}

// stackCall returns one call through the stack of impl, ready to run
// many times.
func stackCall(b *testing.B, impl string) func(ctx context.Context) (*inventoryv1.GetStockResponse, error) {
	switch impl {
	case "resilient":
		h := newHandle(b, stackPolicy())
		return func(ctx context.Context) (*inventoryv1.GetStockResponse, error) {
			return h.Call(ctx, request)
		}
	case "failsafe":
		ex := failsafeStack()
		fn := func(exec failsafe.Execution[*inventoryv1.GetStockResponse]) (*inventoryv1.GetStockResponse, error) {
			return noop(exec.Context(), request)
		}
		return func(ctx context.Context) (*inventoryv1.GetStockResponse, error) {
			return ex.WithContext(ctx).GetWithExecution(fn)
		}
	case "context":
		return func(ctx context.Context) (*inventoryv1.GetStockResponse, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return noop(ctx, request)
		}
	}
	b.Fatalf("unknown impl %q", impl)
	return nil
}

var stackImpls = []string{"resilient", "failsafe", "context"}

// BenchmarkStack measures the full stack of policies around a call that
// answers at once: the runtime, failsafe-go with the same policies, and a
// bare context.WithTimeout, which is the least any per-attempt timeout can
// cost.
func BenchmarkStack(b *testing.B) {
	for _, impl := range stackImpls {
		b.Run("mode=serial/impl="+impl, func(b *testing.B) {
			call := stackCall(b, impl)
			ctx := context.Background()
			var fail failures
			defer fail.report(b)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := call(ctx)
				if err != nil {
					fail.add(err)
				}
				sink = resp
			}
		})
	}
	for _, impl := range stackImpls {
		b.Run("mode=parallel/impl="+impl, func(b *testing.B) {
			call := stackCall(b, impl)
			var fail failures
			defer fail.report(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := call(ctx); err != nil {
						fail.add(err)
					}
				}
			})
		})
	}
}
