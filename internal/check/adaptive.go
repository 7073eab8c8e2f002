// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
)

// The checks of the adaptive layers: the adaptive concurrency limit
// (adaptive_limit) and the client-side throttler (client_throttle). The
// limit's min_limit and initial_limit are AtLeastOne's, its smoothing
// Ratio's. Each caller asks only about a value that is set: an option left
// out, a Go field left 0, takes its default.

// Tolerance refuses an adaptive limit's tolerance that is not a finite
// number of at least 1.
func Tolerance(x float64) string {
	return finiteAtLeastOne(x, ": below 1 the limit would shrink while the dependency is as fast as ever")
}

// AdaptiveMaxLimit refuses an adaptive limit's max_limit outside 1 to
// contract.MaxAdaptiveLimit.
func AdaptiveMaxLimit(n int64) string {
	if n > contract.MaxAdaptiveLimit {
		return fmt.Sprintf("must be at most %d, got %d", contract.MaxAdaptiveLimit, n)
	}
	return AtLeastOne(n)
}

// AdaptiveWindow refuses a window of the adaptive layers (the limit's
// baseline_window, the throttler's window) shorter than
// contract.MinAdaptiveWindow, negative included.
func AdaptiveWindow(d time.Duration) string {
	if d < contract.MinAdaptiveWindow {
		return fmt.Sprintf("must be at least %v, got %v: the window is ten buckets of at least a nanosecond each", contract.MinAdaptiveWindow, d)
	}
	return ""
}

// ThrottleK refuses a throttler's k that is not a finite number of at
// least 1.
func ThrottleK(k float64) string {
	return finiteAtLeastOne(k, ": with less the throttler refuses requests the dependency accepts")
}

// MaxRefusal refuses a throttler's max_refusal outside (0, 1), NaN
// included.
func MaxRefusal(x float64) string {
	if !(x > 0 && x < 1) {
		return fmt.Sprintf("must be in (0, 1), got %v: some attempts must always reach the dependency to see it recover", x)
	}
	return ""
}

// MinAboveMax refuses an adaptive limit's min_limit above its max_limit
// (from: max_limit's origin), blaming min_limit. Both are the values in
// force, defaults and the bulkhead's ceiling applied.
func MinAboveMax(minLimit, maxLimit int64, from string) Words {
	if minLimit <= maxLimit {
		return ""
	}
	return words("%d is above {MaxLimit} %d%s: lower {MinLimit} or raise {MaxLimit}", minLimit, maxLimit, from)
}

// MaxBelowMin is MinAboveMax blaming max_limit (from: min_limit's
// origin).
func MaxBelowMin(minLimit, maxLimit int64, from string) Words {
	if minLimit <= maxLimit {
		return ""
	}
	return words("%d is below {MinLimit} %d%s: raise {MaxLimit} or lower {MinLimit}", maxLimit, minLimit, from)
}

// AdaptiveTimeout refuses an adaptive limit in force on a unary method
// that has no per-attempt timeout (0 for none): the limit halves on a
// timed-out attempt, and could never fall while the dependency hangs.
func AdaptiveTimeout(method string, timeout time.Duration) Words {
	if timeout > 0 {
		return ""
	}
	return words("%s has no {Timeout}: the limit halves when an attempt times out, and without a per-attempt timeout a dependency that hangs never makes it fall", method)
}

// AdaptiveOverall refuses an adaptive limit in force on a unary method
// whose timeout is as long as its overall_timeout (0 for none of either;
// a longer timeout is Timeout's to refuse): no attempt then gets a timeout
// of its own, since the whole call's limit is already as short, and an
// attempt cut by that limit does not halve the limit (late in a call it
// may have had a few milliseconds, which says little of the dependency),
// so a dependency that hangs never makes it fall, as without a timeout.
// AdaptiveTimeout is asked about a method without one.
func AdaptiveOverall(method string, timeout, overall time.Duration) Words {
	if timeout <= 0 || timeout != overall {
		return ""
	}
	return words("%s's {Timeout} %v is as long as its {OverallTimeout} %v: no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, so a dependency that hangs never makes it fall", method, timeout, overall)
}

// InitialOutside refuses an adaptive limit's initial_limit outside
// [min_limit, max_limit], the values in force, blaming initial_limit. The
// caller adds how else to mend it (", or remove it").
func InitialOutside(initial, minLimit, maxLimit int64) Words {
	if initial >= minLimit && initial <= maxLimit {
		return ""
	}
	return words("%d is not between {MinLimit} %d and {MaxLimit} %d: set it within them", initial, minLimit, maxLimit)
}
