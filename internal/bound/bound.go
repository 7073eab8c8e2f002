// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package bound computes how long the policy of a method lets one call of
// it run, written once for the two that must agree on it: the client
// runtime, which limits a cache's shared call and a stream by it, and the
// plugin's exports, which write it where the target has one limit for the
// whole call (gRPC's service config, Envoy's route). It is a leaf over
// runtime/policy: the runtime links it without widening its exported
// surface, and the plugin's binary without the runtime.
package bound

import (
	"math"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// Call is the longest the generated client lets one call of m run once it
// is admitted (holds its rate-limit token and its bulkhead permit, whose
// waits have their own max_wait, as a call's OverallTimeout starts after
// them); 0 when nothing bounds it but the caller's deadline.
//
//   - A stream: its OverallTimeout, else its Timeout (it is never retried
//     or hedged).
//   - A unary call of one attempt (OneAttempt: no hedging, and no retry or
//     one of MaxAttempts ≤ 1): the shorter of Timeout and OverallTimeout
//     that are set, since the attempt's own timeout cuts it.
//   - Otherwise its OverallTimeout when it has one, else, when every
//     attempt has a Timeout: for a hedged call, (MaxCopies − 1) × Delay +
//     Timeout, the last copy being sent then and running its own timeout;
//     for a retried one, MaxAttempts × Timeout plus the bound of every
//     backoff between the attempts.
//
// The sum saturates at the longest Duration instead of wrapping, and is
// computed in at most maxSteps steps whatever MaxAttempts is.
func Call(m *policy.Method) time.Duration {
	if m.Kind != policy.KindUnary {
		if m.OverallTimeout > 0 {
			return m.OverallTimeout
		}
		return max(m.Timeout, 0)
	}
	if OneAttempt(m) {
		switch {
		case m.Timeout > 0 && m.OverallTimeout > 0:
			return min(m.Timeout, m.OverallTimeout)
		case m.OverallTimeout > 0:
			return m.OverallTimeout
		}
		return max(m.Timeout, 0)
	}
	if m.OverallTimeout > 0 {
		return m.OverallTimeout
	}
	if m.Timeout <= 0 {
		return 0
	}
	if h := m.Hedging; h != nil {
		return addSat(mulSat(int64(max(h.MaxCopies-1, 0)), h.Delay), m.Timeout)
	}
	return retried(m.Retry, m.Timeout)
}

// OneAttempt reports whether a unary call of m makes one attempt: it is
// not hedged, and has no retry or one of MaxAttempts ≤ 1, which the runtime
// makes as it makes a call with none (an override writes
// retry.max_attempts: 1 to turn retries off).
func OneAttempt(m *policy.Method) bool {
	return m.Hedging == nil && (m.Retry == nil || m.Retry.MaxAttempts <= 1)
}

// retried is r.MaxAttempts attempts of timeout each and the bound of every
// backoff between them: each wait is drawn below InitialBackoff ×
// Multiplier^(n−1), capped at MaxBackoff, as the runtime draws it.
func retried(r *policy.Retry, timeout time.Duration) time.Duration {
	total := mulSat(int64(max(r.MaxAttempts, 1)), timeout)
	bound := float64(r.InitialBackoff)
	for i := 1; i < r.MaxAttempts; i++ {
		wait := r.MaxBackoff
		if bound < float64(r.MaxBackoff) {
			wait = time.Duration(bound)
		}
		next := bound * max(r.Multiplier, 1)
		// Once the bound is capped, stops growing, or after maxSteps
		// waits, every later wait is counted at this one's bound (or the
		// cap): MaxAttempts may be in the billions, and the sum saturates
		// instead of wrapping.
		if wait == r.MaxBackoff || next == bound || i >= maxSteps {
			if i >= maxSteps {
				wait = r.MaxBackoff
			}
			return addSat(total, mulSat(int64(r.MaxAttempts-i), wait))
		}
		total = addSat(total, wait)
		bound = next
	}
	return total
}

// Envoy is Call for m's attempts made by Envoy (the route's retry_policy
// of the Envoy export) instead of the runtime: the same but for the
// back-offs, which Envoy draws, before its Nth retry, below
// (2^N − 1) × base_interval (InitialBackoff: 1, 3, 7, 15 times it), capped
// at max_interval (MaxBackoff), whatever the Multiplier; the runtime's
// bound grows only by Multiplier, so its sum would cut Envoy's last
// attempt before its per_try_timeout.
func Envoy(m *policy.Method) time.Duration {
	if m.Kind != policy.KindUnary || OneAttempt(m) || m.OverallTimeout > 0 || m.Timeout <= 0 || m.Hedging != nil {
		return Call(m)
	}
	r := m.Retry
	total := mulSat(int64(r.MaxAttempts), m.Timeout)
	for n := 1; n < r.MaxAttempts; n++ {
		// Past 2^62 − 1 times a nanosecond at least, the cap has been
		// reached: MaxBackoff is at most the longest Duration.
		if n >= 62 || mulSat(int64(1)<<n-1, r.InitialBackoff) >= r.MaxBackoff {
			return addSat(total, mulSat(int64(r.MaxAttempts-n), r.MaxBackoff))
		}
		total = addSat(total, mulSat(int64(1)<<n-1, r.InitialBackoff))
	}
	return total
}

// maxSteps is how many backoffs retried adds one by one.
const maxSteps = 10000

// addSat is a + b for durations ≥ 0, saturating at the longest Duration.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat is n × d for n, d ≥ 0, saturating at the longest Duration.
func mulSat(n int64, d time.Duration) time.Duration {
	if n != 0 && d > time.Duration(math.MaxInt64/n) {
		return math.MaxInt64
	}
	return time.Duration(n) * d
}
