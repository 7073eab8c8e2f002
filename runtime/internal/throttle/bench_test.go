package throttle

import (
	"testing"
	"time"
)

// The hot path of a healthy dependency: Allow reads the window and draws
// nothing, Record adds one accept.
func BenchmarkAllowRecordHealthy(b *testing.B) {
	benchAllowRecord(b, true)
}

// The hot path during an outage: Allow draws a random number and most
// requests are refused.
func BenchmarkAllowRecordOutage(b *testing.B) {
	benchAllowRecord(b, false)
}

func BenchmarkAllowRecordParallel(b *testing.B) {
	th := mustNew(b, Policy{}, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := base
		var i int
		for pb.Next() {
			i++
			now = now.Add(time.Microsecond)
			if th.Allow(now) {
				th.Record(now, i%3 != 0)
			}
		}
	})
}

// benchAllowRecord calls Allow and, when it allows, Record with accepted,
// one microsecond later each time.
func benchAllowRecord(b *testing.B, accepted bool) {
	b.Helper()
	th := mustNew(b, Policy{}, nil)
	b.ReportAllocs()
	now := base
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if th.Allow(now) {
			th.Record(now, accepted)
		}
	}
}
