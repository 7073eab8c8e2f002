package runtime

import (
	"time"

	cwindow "github.com/go-resilient/resilient/runtime/internal/window"
)

// outcomeWindow is the window a breaker counts its calls (a) and failures
// (b) over: the last stretch of time (window) or the last N calls
// (countWindow, BreakerPolicy.WindowCalls).
type outcomeWindow interface {
	add(now int64, da, db uint64)
	sum(now int64) (a, b uint64)
	reset()
}

// countWindow is a count-based window of the last N outcomes.
type countWindow struct{ c *cwindow.Count }

func (w countWindow) add(now int64, da, db uint64) { w.c.Add(now, da, db) }
func (w countWindow) sum(now int64) (a, b uint64)  { return w.c.Sum(now) }
func (w countWindow) reset()                       { w.c.Reset() }

// newOutcomeWindow is the window p asks for. A WindowCalls beyond what
// Validate allows is held within [1, cwindow.MaxCount].
func newOutcomeWindow(p BreakerPolicy) outcomeWindow {
	if p.WindowCalls <= 0 {
		return newWindow(p.Window)
	}
	c, err := cwindow.NewCount(min(p.WindowCalls, cwindow.MaxCount))
	if err != nil {
		panic(err) // unreachable: the size is in range
	}
	return countWindow{c}
}

// checkWindow checks the breaker's window: a duration, or a number of calls
// that MinimumCalls can reach.
func (b *BreakerPolicy) checkWindow(f string, bad badFunc) {
	switch {
	case b.WindowCalls < 0 || b.WindowCalls > cwindow.MaxCount:
		bad(f+".WindowCalls", "must be in [1, %d], or 0 for a window in time, is %d", cwindow.MaxCount, b.WindowCalls)
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
