// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package bound_test

import (
	"math"
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack22cEnvoyBackoffs: the bound of a call whose attempts Envoy
// makes counts Envoy's back-offs ((2^N − 1) × base, capped), saturates
// instead of wrapping for any max_attempts, and is Call's wherever no
// back-off is Envoy's (one attempt, an overall_timeout, no timeout).
// (Its loop stops at 62 steps: a 4294967295-attempt policy costs what a
// 62-attempt one does.)
func TestAttack22cEnvoyBackoffs(t *testing.T) {
	ms := time.Millisecond
	retry := func(n int, initial, maxB time.Duration) *policy.Retry {
		return &policy.Retry{MaxAttempts: n, InitialBackoff: initial, MaxBackoff: maxB, Multiplier: 2, RetryableCodes: 1 << 14}
	}
	for _, c := range []struct {
		name string
		m    policy.Method
		want time.Duration
	}{
		{"3 attempts", policy.Method{Timeout: 200 * ms, Retry: retry(3, 50*ms, time.Second)}, 600*ms + 50*ms + 150*ms},
		{"capped", policy.Method{Timeout: 200 * ms, Retry: retry(5, 100*ms, 250*ms)}, 1000*ms + 100*ms + 3*250*ms},
		{"one attempt", policy.Method{Timeout: 200 * ms, Retry: retry(1, 50*ms, time.Second)}, 200 * ms},
		{"overall", policy.Method{Timeout: 200 * ms, OverallTimeout: 700 * ms, Retry: retry(3, 50*ms, time.Second)}, 700 * ms},
		{"no timeout", policy.Method{Retry: retry(3, 50*ms, time.Second)}, 0},
		{"4294967295 attempts of 1ns, back-offs up to 1h", policy.Method{Timeout: 1, Retry: retry(math.MaxUint32, 1, time.Hour)}, math.MaxInt64},
		{"4294967295 attempts of 1ns, back-offs of 1ns", policy.Method{Timeout: 1, Retry: retry(math.MaxUint32, 1, 1)},
			time.Duration(math.MaxUint32) + time.Duration(math.MaxUint32-1)},
		{"a base of 1h", policy.Method{Timeout: 1, Retry: retry(100, time.Hour, 1<<63-1)}, math.MaxInt64},
	} {
		got := bound.Envoy(&c.m) // at most 62 steps, whatever max_attempts
		if got != c.want {
			t.Errorf("%s: bound.Envoy = %v, want %v", c.name, got, c.want)
		}
		if call := bound.Call(&c.m); got < call {
			// With these cases' multiplier of 2, Envoy's back-offs are
			// never shorter than the runtime's; past 2 they can be.
			t.Errorf("%s: bound.Envoy %v is below bound.Call %v at a multiplier of 2", c.name, got, call)
		}
	}
}
