package runtime

import (
	"math"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/window"
	"github.com/go-resilient/resilient/runtime/policy"
)

// outcomeWindow is the window a breaker counts its calls (a) and failures
// (b) over: the last stretch of time (*window.Time), or the last
// WindowCalls outcomes (countWindow).
type outcomeWindow interface {
	window.Counter
	// BucketWidth is the stretch of time within which an outcome may be
	// counted early without changing what the window holds (settle).
	BucketWidth() time.Duration
}

// countWindow is a window of the last N outcomes.
type countWindow struct{ *window.Count }

// BucketWidth of a count window is unbounded: it has no clock, and an
// outcome counts the same whenever it is counted.
func (countWindow) BucketWidth() time.Duration { return math.MaxInt64 }

// newOutcomeWindow is the window p asks for. A WindowCalls beyond what
// Validate allows is held within [1, window.MaxCount].
func newOutcomeWindow(p policy.Breaker) outcomeWindow {
	if p.WindowCalls <= 0 {
		return window.NewTime(p.Window)
	}
	c, err := window.NewCount(min(p.WindowCalls, window.MaxCount))
	if err != nil {
		panic(err) // unreachable: the size is in range
	}
	return countWindow{c}
}

// quiet reports whether no failure can be in the window at n, so that a
// success then cannot open the breaker and the window need not be judged:
// for a window in time, the last failure is older than Window; for a count
// window, the ring holds none (one atomic load).
func (b *breaker) quiet(n int64) bool {
	if b.p.WindowCalls > 0 {
		_, failures := b.outcomes.Sum(n)
		return failures == 0
	}
	return n-b.lastFailure.Load() > int64(b.p.Window)
}
