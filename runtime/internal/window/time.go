package window

import (
	"math"
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
//
// The newest bucket ever added to is kept unwrapped (latest), so that the
// wrap of the epochs cannot be mistaken for time: a reading a whole window
// older than it is dropped, a slot of another epoch within the window is
// older and reused, and the slots a step forward skips over are emptied,
// so that counts of 2^24 buckets ago never come back as current (before,
// a window idle for between 2^23 and 2^24 buckets, ten to twenty days of a
// 1 s window, dropped every add as a late reading).
type Time struct {
	width   int64 // nanoseconds per bucket
	latest  atomic.Int64
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
func NewTime(d time.Duration) *Time { return newWidth(int64(d) / Buckets) }

// newWidth returns an empty window of buckets width nanoseconds wide (1
// at least).
func newWidth(width int64) *Time {
	w := &Time{width: max(width, 1)}
	w.latest.Store(-Buckets)
	return w
}

// NewLasting returns an empty window for counts that must stay counted for
// at least d, as a retry budget's retries must: its buckets are d/(Buckets−1)
// wide (rounded up to a nanosecond), so that SumSplit's b, over all Buckets
// buckets, still holds a count more than d after it was made and drops it
// by d·Buckets/(Buckets−1), while its a, over the newest Buckets−1, has
// dropped a count by d (plus the rounding).
func NewLasting(d time.Duration) *Time {
	return newWidth((int64(d) + Buckets - 2) / (Buckets - 1))
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
// a whole window older than the newest bucket added to is outside the
// window of anyone who sums it, and is dropped rather than wiping the
// newer counts of its slot.
func (w *Time) Add(now int64, da, db uint64) {
	q := w.index(now)
	if l := w.latest.Load(); q > l {
		w.advance(l, q)
	} else if q <= l-Buckets {
		return
	}
	epoch := uint64(q) & epochMask
	slot := &w.buckets[q%Buckets]
	for {
		old := slot.Load()
		e, a, b := unpack(old)
		if e != epoch {
			if a|b != 0 && q <= w.latest.Load()-Buckets {
				return // the slot was reused for a newer epoch meanwhile
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
	q := w.index(now)
	epoch := uint64(q) & epochMask
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

// index is the unwrapped bucket of now, kept far from overflow.
func (w *Time) index(now int64) int64 {
	return min(max(now, 0)/w.width, math.MaxInt64/2)
}

// advance moves latest from l forward to q, and empties the slots of the
// buckets after l up to q that hold counts of an epoch that wrapped to
// near theirs: they are far older than the window (a writer of one of those buckets finds its slot
// emptied or writes it itself; a concurrent late writer drops its add, as
// latest has passed it).
func (w *Time) advance(l, q int64) {
	for !w.latest.CompareAndSwap(l, q) {
		if l = w.latest.Load(); l >= q {
			return
		}
	}
	for x := max(l+1, q-Buckets+1, 0); x <= q; x++ {
		slot := &w.buckets[x%Buckets]
		if old := slot.Load(); old != 0 {
			// Only an epoch that wrapped to within a window of x could be
			// summed as current; the slot's others drop out by themselves.
			e, _, _ := unpack(old)
			if d := (uint64(x) - e) & epochMask; d != 0 && (d < Buckets || d > epochMask-Buckets) {
				slot.CompareAndSwap(old, 0)
			}
		}
	}
}

// Sum returns the totals of the buckets that lie within the window ending
// at now.
func (w *Time) Sum(now int64) (a, b uint64) { return w.sum(now, Buckets) }

// SumSplit returns a over the newest Buckets−1 buckets of the window ending
// at now and b over all Buckets: with a window from NewLasting(d), a counts
// what is at most d old and b everything at most d old and some older.
func (w *Time) SumSplit(now int64) (a, b uint64) { return w.sum(now, Buckets-1) }

// sum returns a over the newest aBuckets buckets of the window ending at
// now and b over all of them.
func (w *Time) sum(now int64, aBuckets uint64) (a, b uint64) {
	q := w.index(now)
	if q >= w.latest.Load()+Buckets {
		return 0, 0 // nothing was added within the window
	}
	cur := uint64(q) & epochMask
	for i := range w.buckets {
		e, ba, bb := unpack(w.buckets[i].Load())
		if age := (cur - e) & epochMask; age < Buckets {
			if age < aBuckets {
				a += ba
			}
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
