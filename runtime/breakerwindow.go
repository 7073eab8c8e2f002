package runtime

import (
	"time"

	"github.com/go-resilient/resilient/runtime/internal/window"
)

// newOutcomeWindow is the window a breaker counts its calls (a) and
// failures (b) over: the last stretch of time, or the last WindowCalls
// outcomes (a count window). A WindowCalls beyond what Validate allows is
// held within [1, window.MaxCount].
func newOutcomeWindow(p BreakerPolicy) window.Counter {
	if p.WindowCalls <= 0 {
		return window.NewTime(p.Window)
	}
	c, err := window.NewCount(min(p.WindowCalls, window.MaxCount))
	if err != nil {
		panic(err) // unreachable: the size is in range
	}
	return c
}

// checkWindow checks the breaker's window: a duration, or a number of calls
// that MinimumCalls can reach.
func (b *BreakerPolicy) checkWindow(f string, bad badFunc) {
	switch {
	case b.WindowCalls < 0 || b.WindowCalls > window.MaxCount:
		bad(f+".WindowCalls", "must be in [1, %d], or 0 for a window in time, is %d", window.MaxCount, b.WindowCalls)
	case b.WindowCalls > 0:
		if b.MinimumCalls > b.WindowCalls {
			bad(f+".MinimumCalls", "%d is more than the %d calls the window holds: the breaker could never open", b.MinimumCalls, b.WindowCalls)
		}
	default:
		positive(b.Window, f+".Window", bad)
	}
}

// windowSpan is how long ago a failure may be and still be in the window:
// Window for a window in time; for a count window, any age.
func (b *BreakerPolicy) windowSpan() time.Duration {
	if b.WindowCalls > 0 {
		return time.Duration(1<<63 - 1)
	}
	return b.Window
}
