package runtime

import (
	"sync/atomic"
	"time"
)

// window counts two quantities (a and b) over a sliding time window, in
// windowBuckets buckets. Each bucket is one atomic word holding its epoch
// and both counts, so adding is one compare-and-swap, never a lock, and a
// bucket that is reused for a new epoch cannot lose a concurrent add.
//
// Layout of a bucket word: epoch in the high 24 bits, a in the next 20, b in
// the low 20. A bucket holds at most 2^20-1 of each count; an add that would
// pass that is dropped whole, both counts, so that a full bucket keeps the
// ratio b/a of what it counted (a breaker's failures, a budget's retries
// per request). Epochs wrap after 2^24 buckets, far longer than any bucket
// stays untouched and still counted.
type window struct {
	width   int64 // nanoseconds per bucket
	buckets [windowBuckets]atomic.Uint64
}

const (
	windowBuckets = 10
	countBits     = 20
	countMax      = 1<<countBits - 1
	epochBits     = 24
	epochMask     = 1<<epochBits - 1
)

func newWindow(d time.Duration) *window {
	w := &window{width: int64(d) / windowBuckets}
	if w.width < 1 {
		w.width = 1
	}
	return w
}

func unpack(v uint64) (epoch, a, b uint64) {
	return v >> (2 * countBits), v >> countBits & countMax, v & countMax
}

func pack(epoch, a, b uint64) uint64 {
	return epoch<<(2*countBits) | a<<countBits | b
}

// add adds da and db to the bucket of now (nanoseconds since the window's
// clock base).
func (w *window) add(now int64, da, db uint64) {
	if now < 0 {
		now = 0
	}
	q := uint64(now / w.width)
	epoch := q & epochMask
	slot := &w.buckets[q%windowBuckets]
	for {
		old := slot.Load()
		e, a, b := unpack(old)
		if e != epoch {
			a, b = 0, 0
		}
		if a+da > countMax || b+db > countMax {
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

// sum returns the totals of the buckets that lie within the window ending
// at now.
func (w *window) sum(now int64) (a, b uint64) {
	if now < 0 {
		now = 0
	}
	cur := uint64(now/w.width) & epochMask
	for i := range w.buckets {
		e, ba, bb := unpack(w.buckets[i].Load())
		if (cur-e)&epochMask < windowBuckets {
			a += ba
			b += bb
		}
	}
	return a, b
}

// reset forgets every count.
func (w *window) reset() {
	for i := range w.buckets {
		w.buckets[i].Store(0)
	}
}
