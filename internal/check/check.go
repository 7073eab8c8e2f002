// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package check says what is wrong with one value of a policy, or one pair
// of values, in the words all of its boundaries use. runtime/policy checks
// each value of a policy with it, once, for a policy built in Go
// (Validate) and for the options of a .proto file or an override file
// (policy.GroupProblems, which internal/rules runs on each option); the
// checks of two values set at different levels, of a value against the
// method, and of the codes of an options list, element by element, are
// internal/rules' own, on the merged levels. Each function takes plain
// values (a count, a time.Duration, a ratio, status codes) and returns the
// core of the message ("must be in (0, 1], got 1.5"), or "" when the
// value is fine. A core that names another value (a check of two values,
// of a method's timeouts) is Words, which names it by its Go path
// between braces ("… is shorter than {FreshTTL} 1s") and reads in either
// author's names: FreshTTL to a Go author (Words.Go), fresh_ttl to an
// options author (Words.Options). The caller names the field and adds how
// to mend it in the terms of its author: "remove it for the default 0.5"
// to an options author, "use 0 for none" to a Go author.
//
// Whether a value is present is the caller's to decide (an option left out
// takes its default; a Go field's zero value may mean "none"), and so is
// the blame between two values set at different levels: the functions
// that relate two values take from, the origin of the other value as the
// caller writes it (" (the default)", " (set in (resilient.v1.file))"),
// "" for none.
//
// It is a leaf, like internal/contract: the plugin's binary links it
// without the runtime, and the runtime without the options contract.
package check

import (
	"fmt"
	"math"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
)

// Positive refuses a duration that is not above zero.
func Positive(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("must be positive, got %v", d)
	}
	return ""
}

// NotNegative refuses a negative duration (0 is the caller's "none" or
// "at once").
func NotNegative(d time.Duration) string {
	if d < 0 {
		return fmt.Sprintf("must not be negative, got %v", d)
	}
	return ""
}

// Ratio refuses a ratio outside (0, 1], NaN included: a budget's ratio, a
// breaker's failure ratio, an adaptive limit's smoothing.
func Ratio(r float64) string {
	if !(r > 0 && r <= 1) {
		return fmt.Sprintf("must be in (0, 1], got %v", r)
	}
	return ""
}

// AtLeastOne refuses a count below 1: a breaker's minimum_calls, a
// bulkhead's permits, a rate limit's burst, a cache's max_entries, an
// adaptive limit's bounds.
func AtLeastOne(n int64) string { return atLeast(1, n, "") }

// MaxAttempts refuses a retry's max_attempts below 1.
func MaxAttempts(n int64) string {
	return atLeast(1, n, " (it counts the first attempt, and 1 means no retry)")
}

// MaxCopies refuses a hedging's max_copies below 2.
func MaxCopies(n int64) string {
	return atLeast(2, n, " (it counts the first copy, and 1 would mean no hedging)")
}

// atLeast refuses a count n below least, followed by why ("" for
// nothing more).
func atLeast(least, n int64, why string) string {
	if n < least {
		return fmt.Sprintf("must be at least %d, got %d%s", least, n, why)
	}
	return ""
}

// Multiplier refuses a backoff multiplier that is not a finite number of
// at least 1.
func Multiplier(m float64) string { return finiteAtLeastOne(m, "") }

// finiteAtLeastOne refuses a number that is not finite and at least 1
// (NaN included), followed by why ("" for nothing more).
func finiteAtLeastOne(x float64, why string) string {
	if x >= 1 && !math.IsInf(x, 0) {
		return ""
	}
	return fmt.Sprintf("must be a finite number of at least 1, got %v%s", x, why)
}

// Rate refuses a rate limit's requests_per_second that is not positive
// and finite.
func Rate(x float64) string {
	if !(x > 0) || math.IsInf(x, 0) {
		return fmt.Sprintf("must be a positive, finite number, got %v; it is the sustained rate of calls allowed", x)
	}
	return ""
}

// Probes refuses a breaker's half_open_probes outside 1 to
// contract.MaxHalfOpenProbes, the most its counters hold.
func Probes(n int64) string {
	if n > contract.MaxHalfOpenProbes {
		return fmt.Sprintf("must be at most %d, got %d: a handful of probes tells whether the dependency is back", contract.MaxHalfOpenProbes, n)
	}
	return AtLeastOne(n)
}

// WindowCalls refuses a count-based breaker window outside 1 to
// contract.MaxWindowCalls (a caller for which 0 means a window in time
// does not ask about 0).
func WindowCalls(n int64) string {
	if n < 1 || n > contract.MaxWindowCalls {
		return fmt.Sprintf("must be in [1, %d], got %d", contract.MaxWindowCalls, n)
	}
	return ""
}
