package adaptive

import (
	"testing"
	"time"
)

// The hot path: one Acquire and one Release of a success per call.
func BenchmarkAcquireRelease(b *testing.B) {
	l := mustNew(b, Policy{})
	b.ReportAllocs()
	now := base
	for b.Loop() {
		now = now.Add(time.Microsecond)
		tok, ok := l.Acquire()
		if !ok {
			b.Fatal("refused with nothing in flight")
		}
		l.Release(tok, Success, 40*time.Millisecond, now)
	}
}

// A refusal at the limit: one load of the in-flight count and the limit.
func BenchmarkAcquireRefused(b *testing.B) {
	l := mustNew(b, Policy{InitialLimit: 1, MaxLimit: 1})
	l.Acquire()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := l.Acquire(); ok {
			b.Fatal("admitted over the limit")
		}
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	l := mustNew(b, Policy{MaxLimit: 1000, InitialLimit: 1000})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := base
		for pb.Next() {
			now = now.Add(time.Microsecond)
			if tok, ok := l.Acquire(); ok {
				l.Release(tok, Success, 40*time.Millisecond, now)
			}
		}
	})
}

// Twenty calls in flight, as towards a dependency of 40 ms at 500 calls/s:
// a round ends about once per twenty Releases, the others only add their
// sample.
func BenchmarkAcquireReleaseInFlight(b *testing.B) {
	l := mustNew(b, Policy{})
	var ring [20]Token
	for i := range ring {
		ring[i], _ = l.Acquire()
	}
	b.ReportAllocs()
	now := base
	var i int
	for b.Loop() {
		now = now.Add(2 * time.Millisecond)
		l.Release(ring[i], Success, 40*time.Millisecond, now)
		tok, ok := l.Acquire()
		if !ok {
			b.Fatal("refused below the limit")
		}
		ring[i] = tok
		i = (i + 1) % len(ring)
	}
}
