package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestBreakerCountsEachSuccessOnceWithoutAClockRead: over real gRPC, on
// the system clock, with an attempt timeout within a bucket (so successes
// are counted at their attempt's start, see clock.go), the breaker opens
// exactly when the annotated ratio is reached: each success counted once,
// none lost, none doubled.
func TestBreakerCountsEachSuccessOnceWithoutAClockRead(t *testing.T) {
	var fail atomic.Bool
	_, cc := start(t, func(context.Context, server.Call) error {
		if fail.Load() {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	})
	br := breakerPolicy(6, 1) // ratio 0.5 over at least 6 calls, 10 s window (1 s buckets)
	rt := inventory(t, policy.Service{Breaker: br, Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: time.Second},
	}})
	for range 3 {
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatal(err)
		}
	}
	fail.Store(true)
	// 3 successes, then failures: 4 calls (1 failure), 5 (2 < 2.5) stay
	// closed; 6 calls with 3 failures open it. Successes lost would leave
	// it closed below 6 calls; doubled, at 9 calls with 3 failures.
	for i := 1; i <= 3; i++ {
		if _, err := callGetStock(context.Background(), rt, cc); status.Code(err) != codes.Unavailable {
			t.Fatalf("failure %d: %v, want UNAVAILABLE from the server", i, err)
		}
		want := runtime.StateClosed
		if i == 3 {
			want = runtime.StateOpen
		}
		wantBreaker(t, rt, getStock, want)
	}
}
