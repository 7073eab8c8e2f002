// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package bound_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack22dEnvoyWorst is the longest a request whose attempts Envoy makes
// can take: every attempt runs its per_try_timeout, and each back-off is
// the longest Envoy can draw. doubling is Envoy's JitteredExponential
// back-off since 1.13 (the Nth drawn below base × 2^(N−1), the interval
// set to max_interval once doubling would pass half of it); else the
// documented (2^N − 1) × base, capped at max_interval.
func attack22dEnvoyWorst(m *policy.Method, doubling bool) time.Duration {
	r := m.Retry
	total := time.Duration(r.MaxAttempts) * m.Timeout
	next := r.InitialBackoff
	for n := 1; n < r.MaxAttempts; n++ {
		var b time.Duration
		if doubling {
			b = min(next, r.MaxBackoff)
			if next < r.MaxBackoff/2 {
				next *= 2
			} else {
				next = r.MaxBackoff
			}
		} else {
			b = min(time.Duration(1<<n-1)*r.InitialBackoff, r.MaxBackoff)
		}
		total += b
	}
	return total
}

// TestAttack22dEnvoyBoundHoldsEnvoysWorstCase: for 2000 random retried
// policies (2 to 10 attempts, timeouts of 1 ms to 10 s, back-offs of
// 1 ms to 5 s), the route timeout bound.Envoy gives is never shorter than
// the longest request Envoy can make under either back-off: Envoy's last
// attempt always gets its whole per_try_timeout. (It may be shorter than
// the runtime's own bound, bound.Call, under a multiplier above 2, whose
// back-offs grow faster than Envoy's: the route's timeout bounds Envoy's
// retries only.)
func TestAttack22dEnvoyBoundHoldsEnvoysWorstCase(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 4))
	ms := time.Millisecond
	for range 2000 {
		initial := time.Duration(1+rng.IntN(1000)) * ms
		m := &policy.Method{Kind: policy.KindUnary, Timeout: time.Duration(1+rng.IntN(10000)) * ms,
			Retry: &policy.Retry{MaxAttempts: 2 + rng.IntN(9), InitialBackoff: initial,
				MaxBackoff: initial + time.Duration(rng.IntN(5000))*ms, Multiplier: 1 + 3*rng.Float64(), RetryableCodes: 1 << 14}}
		got := bound.Envoy(m)
		for _, doubling := range []bool{true, false} {
			if worst := attack22dEnvoyWorst(m, doubling); got < worst {
				t.Fatalf("%+v %+v: bound.Envoy %v, below Envoy's worst %v (doubling %v)", m, m.Retry, got, worst, doubling)
			}
		}
	}
}
