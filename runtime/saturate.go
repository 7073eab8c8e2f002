package runtime

import (
	"math"
	"time"
)

// addSat returns the clock reading t (nanoseconds since the client's base)
// plus d, saturated at the largest reading instead of wrapping: an instant
// that far away is never reached, where a wrapped one is already past.
// The breaker's cool-down and every wait the runtime adds to the clock
// go through it.
func addSat(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	if d < 0 && t < math.MinInt64-int64(d) {
		return math.MinInt64
	}
	return t + int64(d)
}

// msSat converts a whole number of milliseconds to a Duration, saturated
// at the largest Duration (about 292 years) instead of wrapping to a
// negative or short one.
func msSat(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > most:
		return math.MaxInt64
	case ms < -most:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}
