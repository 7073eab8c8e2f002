package runtime

import (
	"context"
	"time"
)

// Clock tells the time to the runtime's state machines: the circuit
// breaker's window and cool-down and the retry budget's window. Tests pass a
// fake one to drive those machines without sleeping. Deadlines and backoff
// waits always use real time, because gRPC and contexts do.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// nanos returns t as nanoseconds since base, on the monotonic clock when
// both carry a monotonic reading.
func nanos(t, base time.Time) int64 { return int64(t.Sub(base)) }

// span is what an attempt knows of its own start without a clock read of
// its own.
type span struct {
	start int64 // nanoseconds since the client's base; meaningful when known
	known bool
	// bounded: start is the reading from which the attempt's timeout was
	// counted, so an attempt whose context is not over when it ends lasted
	// at most that timeout.
	bounded bool
}

// attemptContext returns ctx limited to d from now, or ctx itself (and a
// nil cancel) when its deadline is already as short, like shorten. With
// timed, it also returns the reading "now" was: the clock read that any
// context.WithTimeout makes, taken here so that the attempt needs no read
// of its own to know when it began. The reading is kept only with the
// system clock: under a fake clock (WithClock) the state machines must see
// no other time than the fake one.
func (c *Client) attemptContext(ctx context.Context, d time.Duration, timed bool, now time.Time) (context.Context, context.CancelFunc, span) {
	if !timed {
		actx, cancel := shorten(ctx, d, now)
		return actx, cancel, span{}
	}
	if now.IsZero() {
		now = time.Now()
	}
	var sp span
	if c.system {
		sp = span{start: nanos(now, c.base), known: true, bounded: true}
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) <= d {
		return ctx, nil, sp
	}
	actx, cancel := context.WithDeadline(ctx, now.Add(d))
	return actx, cancel, sp
}
