package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAPanicInAnAttemptIsCountedNowhereButTheMetrics: a unary attempt
// whose call panics (an interceptor) on a closed breaker, with and
// without metrics, with a bulkhead whose free permit is taken without a
// call and an attempt timeout short enough for a success to be counted at
// its start: every panic reaches the caller, gives its permit back, and
// counts in the breaker's window for nothing (the closed breaker's ticket
// is not settled where there are no metrics, and is settled as ignored
// where there are), so that one real failure after them, beside the one
// before, still opens the breaker of MinimumCalls 2; the metrics count
// each panic under UNKNOWN, the server sees none of them.
func TestAPanicInAnAttemptIsCountedNowhereButTheMetrics(t *testing.T) {
	for _, metrics := range []bool{false, true} {
		name := "no metrics"
		if metrics {
			name = "metrics"
		}
		t.Run(name, func(t *testing.T) {
			srv, err := server.Start("127.0.0.1:0", server.Fail(codes.Unavailable))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Stop)
			var panics atomic.Bool
			cc := dialFault(t, srv.Addr(), grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if panics.Load() {
					panic("interceptor panicked")
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}))
			opts := []runtime.Option{runtime.WithClock(newFakeClock())}
			reg := prometheus.NewRegistry()
			if metrics {
				opts = append(opts, runtime.WithRegisterer(reg))
			}
			// A timeout below the breaker's bucket (Window/10 = 1 s): a
			// success may be counted at the attempt's start.
			rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1), Bulkhead: &policy.Bulkhead{Permits: 1},
				Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: 500 * time.Millisecond}}}, opts...)
			if _, err := callGetStock(context.Background(), rt, cc); status.Code(err) != codes.Unavailable {
				t.Fatalf("first call: %v, want UNAVAILABLE", err)
			}
			wantBreaker(t, rt, getStock, runtime.StateClosed)
			const n = 5
			panics.Store(true)
			for range n {
				wantPanic(t, "interceptor panicked", func() { _, _ = callGetStock(context.Background(), rt, cc) })
				wantPermits(t, rt, getStock, 0)
				wantBreaker(t, rt, getStock, runtime.StateClosed)
			}
			panics.Store(false)
			if _, err := callGetStock(context.Background(), rt, cc); status.Code(err) != codes.Unavailable {
				t.Fatalf("call after the panics: %v, want UNAVAILABLE", err)
			}
			// 2 failures in a window of 2: the panics counted for nothing.
			wantBreaker(t, rt, getStock, runtime.StateOpen)
			wantPermits(t, rt, getStock, 0)
			if got := srv.Calls(getStock); got != 2 {
				t.Errorf("server saw %d calls, want 2: the panicking ones never left", got)
			}
			if metrics {
				wantMetric(t, reg, n, "resilient_client_attempts_total", "method", "GetStock", "code", "UNKNOWN")
				wantMetric(t, reg, 2, "resilient_client_attempts_total", "method", "GetStock", "code", "UNAVAILABLE")
				wantMetric(t, reg, 0, "resilient_client_bulkhead_in_use", "bulkhead", "shared")
			}
		})
	}
}
