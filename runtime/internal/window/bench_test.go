package window

import (
	"testing"
	"time"
)

// The hot path of a breaker that is closed: one Add and one Sum per call.

func BenchmarkCountAddSum(b *testing.B) {
	c := mustCount(b, 100)
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		i++
		c.Add(0, 1, i&1)
		c.Sum(0)
	}
}

func BenchmarkCountAddSumParallel(b *testing.B) {
	c := mustCount(b, 100)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var i uint64
		for pb.Next() {
			i++
			c.Add(0, 1, i&1)
			c.Sum(0)
		}
	})
}

func BenchmarkTimeAddSum(b *testing.B) {
	w := NewTime(10 * time.Second)
	b.ReportAllocs()
	var now int64
	for b.Loop() {
		now += int64(time.Microsecond)
		w.Add(now, 1, uint64(now&1))
		w.Sum(now)
	}
}

func BenchmarkTimeAddSumParallel(b *testing.B) {
	w := NewTime(10 * time.Second)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		for pb.Next() {
			now += int64(time.Microsecond)
			w.Add(now, 1, 0)
			w.Sum(now)
		}
	})
}
