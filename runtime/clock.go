package runtime

import "time"

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
