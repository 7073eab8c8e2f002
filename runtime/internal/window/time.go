package window

import (
	"sync/atomic"
	"time"
)

// Time counts a and b over a sliding window of time, in Buckets buckets. Each
// bucket is one atomic word holding its epoch and both counts, so adding is
// one compare-and-swap, never a lock, and a bucket that is reused for a new
// epoch cannot lose a concurrent add.
//
// Layout of a bucket word: epoch in the high 24 bits, a in the next 20, b in
// the low 20. A bucket holds at most MaxBucketCount of each count; an add
// that would pass it is dropped whole, both counts, so that a full bucket
// keeps the ratio b/a of what it counted (a breaker's failures, a budget's
// retries per request). Epochs wrap after 2^24 buckets, far longer than any
// bucket stays untouched and still counted.
//
// The window covers between d−d/Buckets and d of the past: the oldest
// bucket drops out whole.
type Time struct {
	width   int64 // nanoseconds per bucket
	buckets [Buckets]atomic.Uint64
}

const (
	// Buckets is the number of buckets of a Time window.
	Buckets = 10
	// MaxBucketCount is the largest count one bucket of a Time window holds;
	// an add that would pass it is dropped whole.
	MaxBucketCount = 1<<countBits - 1

	countBits = 20
	epochBits = 24
	epochMask = 1<<epochBits - 1
)

// NewTime returns an empty window of length d (at least Buckets
// nanoseconds; shorter lengths are rounded up to it).
func NewTime(d time.Duration) *Time {
	w := &Time{width: int64(d) / Buckets}
	if w.width < 1 {
		w.width = 1
	}
	return w
}

// BucketWidth returns the time each bucket covers.
func (w *Time) BucketWidth() time.Duration { return time.Duration(w.width) }

func unpack(v uint64) (epoch, a, b uint64) {
	return v >> (2 * countBits), v >> countBits & MaxBucketCount, v & MaxBucketCount
}

func pack(epoch, a, b uint64) uint64 {
	return epoch<<(2*countBits) | a<<countBits | b
}

// Add adds da and db to the bucket of now (nanoseconds since the window's
// clock base; a negative now counts at 0). A reading may come late (taken
// at the start of a long call, or by a goroutine that was descheduled): one
// whose slot already holds a newer epoch is a whole window old, outside
// the window of anyone who sums it, and is dropped rather than wiping the
// newer counts.
func (w *Time) Add(now int64, da, db uint64) {
	if now < 0 {
		now = 0
	}
	q := uint64(now / w.width)
	epoch := q & epochMask
	slot := &w.buckets[q%Buckets]
	for {
		old := slot.Load()
		e, a, b := unpack(old)
		if e != epoch {
			if a|b != 0 && (e-epoch)&epochMask < 1<<(epochBits-1) {
				return // the slot is ahead of now: now is out of the window
			}
			a, b = 0, 0
		}
		if da > MaxBucketCount-a || db > MaxBucketCount-b {
			// The bucket is full: the add is dropped whole, so that the
			// bucket keeps the ratio of what it counted. Saturating each
			// count alone would let failures catch up with saturated calls.
			return
		}
		a, b = a+da, b+db
		if slot.CompareAndSwap(old, pack(epoch, a, b)) {
			return
		}
	}
}

// Remove takes da and db back out of the bucket of now, where Add counted
// them at the same now: a count given back (a budget's retry that was
// decided and then not sent). A bucket that no longer holds now's epoch
// (its counts left the window, or were dropped whole as too old) is left
// alone, and a count is never taken below zero.
func (w *Time) Remove(now int64, da, db uint64) {
	if now < 0 {
		now = 0
	}
	q := uint64(now / w.width)
	epoch := q & epochMask
	slot := &w.buckets[q%Buckets]
	for {
		old := slot.Load()
		e, a, b := unpack(old)
		if e != epoch {
			return
		}
		a, b = a-min(a, da), b-min(b, db)
		if slot.CompareAndSwap(old, pack(epoch, a, b)) {
			return
		}
	}
}

// Sum returns the totals of the buckets that lie within the window ending
// at now.
func (w *Time) Sum(now int64) (a, b uint64) {
	if now < 0 {
		now = 0
	}
	cur := uint64(now/w.width) & epochMask
	for i := range w.buckets {
		e, ba, bb := unpack(w.buckets[i].Load())
		if (cur-e)&epochMask < Buckets {
			a += ba
			b += bb
		}
	}
	return a, b
}

// Reset forgets every count.
func (w *Time) Reset() {
	for i := range w.buckets {
		w.buckets[i].Store(0)
	}
}
