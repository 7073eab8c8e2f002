// Package window holds the sliding windows of outcomes that the runtime's
// circuit breaker, retry budget and client-side throttler count over.
//
// Both windows count two quantities, a and b, and share one method set
// (Add, Sum, Reset, the Counter interface), so that a breaker can be given
// either without knowing which:
//
//   - Time counts over the last stretch of time (10 buckets, the same design
//     as the runtime's own window); a quiet dependency's window empties by
//     itself.
//   - Count counts over the last N calls whatever their age (the default
//     window of resilience4j); a quiet dependency keeps its last N outcomes,
//     and the ratio of a busy one moves with every call instead of every
//     bucket.
//
// For a breaker a is the calls and b the failures among them. Every method
// is safe for concurrent use, takes no lock and allocates nothing.
package window

// Counter is what a circuit breaker needs of a window of outcomes. now is
// in nanoseconds since the window's clock base; Count ignores it.
type Counter interface {
	// Add adds da to a and db to b at now.
	Add(now int64, da, db uint64)
	// Sum returns a and b over the window ending at now.
	Sum(now int64) (a, b uint64)
	// Reset forgets every count.
	Reset()
}

var (
	_ Counter = (*Time)(nil)
	_ Counter = (*Count)(nil)
)
