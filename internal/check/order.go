// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"time"
)

// The checks of two values that must be in order. Each is "" unless the
// values are out of order; most also when one of them is not positive
// (refused on its own, or "none"), as each says. A check the options
// blame on either value, whichever was set at the more specific level, is
// written twice (MaxBackoff and InitialBackoff), with one condition. Each
// leaves the value it blames unnamed (the caller's field path names it)
// and names the other in Words, by its Go path from the group or the
// method ("{InitialBackoff}"), followed by from, the other's origin: a Go
// author reads "InitialBackoff 50ms", an options author "initial_backoff
// 50ms". The Go validator puts the blamed field's name in front
// ("MaxBackoff 10ms is shorter than …"), since the override loader may
// report the problem at the key of either value.

// MaxBackoff refuses a max_backoff shorter than initial_backoff, blaming
// max_backoff.
func MaxBackoff(initial, maxBackoff time.Duration, from string) Words {
	if !backoffOutOfOrder(initial, maxBackoff) {
		return ""
	}
	return words("%v is shorter than {InitialBackoff} %v%s: raise {MaxBackoff} or lower {InitialBackoff}", maxBackoff, initial, from)
}

// InitialBackoff is MaxBackoff blaming initial_backoff.
func InitialBackoff(initial, maxBackoff time.Duration, from string) Words {
	if !backoffOutOfOrder(initial, maxBackoff) {
		return ""
	}
	return words("%v is longer than {MaxBackoff} %v%s: lower {InitialBackoff} or raise {MaxBackoff}", initial, maxBackoff, from)
}

func backoffOutOfOrder(initial, maxBackoff time.Duration) bool {
	return initial > 0 && maxBackoff > 0 && maxBackoff < initial
}

// Timeout refuses a per-attempt timeout longer than the overall timeout,
// blaming timeout. The caller adds the mend; both write "shorten timeout
// or lengthen overall_timeout".
func Timeout(timeout, overall time.Duration, from string) Words {
	if !timeoutsOutOfOrder(timeout, overall) {
		return ""
	}
	return words("%v is longer than {OverallTimeout} %v%s: one attempt cannot outlast the whole call", timeout, overall, from)
}

// OverallTimeout is Timeout blaming overall_timeout.
func OverallTimeout(timeout, overall time.Duration, from string) Words {
	if !timeoutsOutOfOrder(timeout, overall) {
		return ""
	}
	return words("%v is shorter than {Timeout} %v%s: one attempt cannot outlast the whole call", overall, timeout, from)
}

func timeoutsOutOfOrder(timeout, overall time.Duration) bool {
	return timeout > 0 && overall > 0 && timeout > overall
}

// StaleTTL refuses a cache's stale_ttl shorter than its fresh_ttl, blaming
// stale_ttl: an answer is stale only once it stopped being fresh. Unlike
// the others, a stale_ttl that is not positive is compared too: the Go
// validator has no default for it.
func StaleTTL(fresh, stale time.Duration) Words {
	if fresh <= 0 || stale >= fresh {
		return ""
	}
	return words("%v is shorter than {FreshTTL} %v: an answer is stale only after it stopped being fresh", stale, fresh)
}

// HedgingDelay refuses a hedging delay that is not shorter than the
// per-attempt timeout (from: the timeout's origin), else than the overall
// timeout (from: its origin): a copy would time out before the next is
// sent, or no copy could be sent at all. timeout and overall are 0 for
// none.
func HedgingDelay(delay, timeout, overall time.Duration, timeoutFrom, overallFrom string) Words {
	switch {
	case delay <= 0:
	case timeout > 0 && delay >= timeout:
		return words("%v is not shorter than {Timeout} %v%s: each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen {Timeout}", delay, timeout, timeoutFrom)
	case overall > 0 && delay >= overall:
		return words("%v is not shorter than {OverallTimeout} %v%s: no copy could be sent before the call ends; shorten the delay (about the p95)", delay, overall, overallFrom)
	}
	return ""
}

// WindowBelowMinimum refuses a count-based breaker window of fewer calls than
// minimum_calls, blaming window_calls: the window could never hold enough
// calls to open the breaker. windowCalls 0 (a window in time) is fine.
func WindowBelowMinimum(windowCalls, minimum int64, from string) Words {
	if !windowBelowMinimum(windowCalls, minimum) {
		return ""
	}
	return words("%d is fewer than {MinimumCalls} %d%s: the window could never hold enough calls to open the breaker", windowCalls, minimum, from)
}

// MinimumAboveWindow is WindowBelowMinimum blaming minimum_calls.
func MinimumAboveWindow(windowCalls, minimum int64) string {
	if !windowBelowMinimum(windowCalls, minimum) {
		return ""
	}
	return fmt.Sprintf("%d is more than the %d calls the window holds: the breaker could never open", minimum, windowCalls)
}

func windowBelowMinimum(windowCalls, minimum int64) bool {
	return windowCalls >= 1 && minimum > windowCalls
}

// AboveCeiling refuses a bound of an adaptive limit (min_limit, max_limit
// or initial_limit) above the permits of the bulkhead it sits under, the
// limit's ceiling. The caller asks only when there is a bulkhead.
func AboveCeiling(v, permits int64, from string) string {
	if v <= permits {
		return ""
	}
	return fmt.Sprintf("%d is above the bulkhead's %d permits%s, the limit's ceiling: lower it to at most %d", v, permits, from, permits)
}
