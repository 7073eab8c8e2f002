package runtime

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

// A breaker's window judges the ratio of failures however many calls a
// bucket (a tenth of the window) holds. Each count of a bucket holds
// 2^20-1 at most: saturated separately, failures caught up with calls
// saturated by a million successes, and the breaker opened at a ratio far
// below failure_ratio. The bulk adds stand for as many single outcomes
// (the runtime adds one at a time); the last outcome makes the breaker judge.
func TestAttackBreakerRatioUnderHeavyTraffic(t *testing.T) {
	base := time.Unix(3_000_000, 0)
	b := newBreaker(policy.Breaker{FailureRatio: 0.5, MinimumCalls: 100, Window: 10 * time.Second,
		CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}, base, nil)
	at := base.Add(time.Hour)
	n := nanos(at, base)
	for range 2 { // 1.5 million successes in one bucket, then 0.6 million failures
		b.outcomes.Add(n, 750_000, 0)
	}
	for range 6 {
		b.outcomes.Add(n, 100_000, 100_000)
	}
	tk, _, ok := b.allowAt(at)
	if !ok {
		t.Fatal("refused")
	}
	b.doneAt(tk, outcomeFailure, 0, at)
	if s := b.stateAtTime(at); s != StateClosed {
		calls, failures := b.outcomes.Sum(n)
		t.Errorf("breaker %v with %d failures in %d calls counted, at a real ratio of 29%%; want closed", s, failures, calls)
	}
}
