package window

import (
	"fmt"
	"sync/atomic"

	"github.com/go-resilient/resilient/internal/contract"
)

// Count counts a and b over the last N adds of one unit each: a ring of the
// last N outcomes, where a is how many outcomes the ring holds (at most N)
// and b how many of them are failures. It is the count-based window of
// resilience4j's breaker: the ratio moves with every call, and a quiet
// dependency keeps its last N outcomes however old they are.
//
// Recording and reading are O(1): each outcome has a slot in the ring, and a
// running total (one atomic word holding a generation, the number of
// outcomes and the failures among them) is moved by the difference between
// the outcome written and the one it evicts. Nothing takes a lock. Reset
// starts a new generation: slots written in an earlier one count as empty,
// and an add that raced with the Reset is dropped whole, so the total never
// drifts from the ring's content.
//
// Under concurrency the ring holds the last N outcomes up to the order of
// adds that were in progress together; a writer that stalls for N further
// adds may have its outcome replace a newer one in its slot, which the total
// follows exactly.
type Count struct {
	n      uint64
	head   atomic.Uint64 // adds ever begun: the next slot is head % n
	totals atomic.Uint64 // generation | outcomes | failures + failureBias
	slots  []atomic.Uint32
}

// Layout of the totals word: generation in the high 16 bits, the outcomes
// in the next 24, failures plus failureBias in the low 24. The failures of a
// generation equal the failures in its slots once every add has finished;
// while adds are in progress an eviction may be applied before the add it
// evicts, and the bias keeps such a transient negative exact instead of
// borrowing from the outcomes.
//
// Layout of a slot: generation in the high 16 bits, then a bit set once the
// slot holds an outcome, then a bit set when that outcome is a failure.
const (
	// MaxCount is the largest N of a Count window.
	MaxCount = contract.MaxWindowCalls

	genBits     = 16
	genMask     = 1<<genBits - 1
	totalBits   = 24
	totalMask   = 1<<totalBits - 1
	failureBias = 1 << 23

	slotFull    = 2
	slotFailure = 1
)

// NewCount returns an empty window over the last n outcomes. n must be in
// [1, MaxCount].
func NewCount(n int) (*Count, error) {
	if n < 1 || n > MaxCount {
		return nil, fmt.Errorf("window: a count window of %d calls is out of range: give between 1 and %d", n, MaxCount)
	}
	c := &Count{n: uint64(n), slots: make([]atomic.Uint32, n)}
	c.totals.Store(packTotals(0, 0, failureBias))
	return c, nil
}

// Len returns N, the number of outcomes the window holds when full.
func (c *Count) Len() int { return int(c.n) }

func packTotals(gen, outcomes, biased uint64) uint64 {
	return gen<<(2*totalBits) | outcomes<<totalBits | biased
}

func unpackTotals(v uint64) (gen, outcomes, biased uint64) {
	return v >> (2 * totalBits), v >> totalBits & totalMask, v & totalMask
}

// Add records da outcomes at the head of the ring, the first db of them
// (at most da) failures. now is ignored: a count window has no clock. For a
// breaker, Add(now, 1, 0) records a success and Add(now, 1, 1) a failure.
func (c *Count) Add(_ int64, da, db uint64) {
	if da > c.n {
		// Only the last n of them stay in the ring; the failures come first.
		db = db - min(db, da-c.n)
		da = c.n
	}
	for i := range da {
		c.add(i < db)
	}
}

func (c *Count) add(failure bool) {
	gen := c.totals.Load() >> (2 * totalBits)
	i := (c.head.Add(1) - 1) % c.n
	if dOutcomes, dFailures, ok := c.write(gen, i, failure); ok {
		c.apply(gen, dOutcomes, dFailures)
	}
}

// write puts an outcome of generation gen in slot i and returns how the
// totals of gen change: by one outcome unless the slot held one of gen
// already, and by the failure written less the failure evicted. It writes
// nothing and returns false when the slot belongs to a newer generation: a
// Reset overtook this add.
func (c *Count) write(gen, i uint64, failure bool) (dOutcomes, dFailures int64, ok bool) {
	slot := &c.slots[i]
	mine := uint32(gen)<<2 | slotFull
	if failure {
		mine |= slotFailure
	}
	var old uint32
	for {
		old = slot.Load()
		if og := uint64(old >> 2); old&slotFull != 0 && og != gen && (og-gen)&genMask < genMask/2 {
			return 0, 0, false
		}
		if slot.CompareAndSwap(old, mine) {
			break
		}
	}
	dOutcomes = 1
	if failure {
		dFailures = 1
	}
	if old&slotFull != 0 && uint64(old>>2) == gen {
		dOutcomes = 0
		if old&slotFailure != 0 {
			dFailures--
		}
	}
	return dOutcomes, dFailures, true
}

// apply moves the totals of generation gen; a Reset since leaves them be,
// the slot written then counting as empty in the new generation.
func (c *Count) apply(gen uint64, dOutcomes, dFailures int64) {
	if dOutcomes == 0 && dFailures == 0 {
		return
	}
	for {
		t := c.totals.Load()
		g, o, f := unpackTotals(t)
		if g != gen {
			return
		}
		if c.totals.CompareAndSwap(t, packTotals(g, uint64(int64(o)+dOutcomes), uint64(int64(f)+dFailures))) {
			return
		}
	}
}

// Sum returns the outcomes the ring holds (at most N) and the failures
// among them. now is ignored.
func (c *Count) Sum(_ int64) (outcomes, failures uint64) {
	_, o, f := unpackTotals(c.totals.Load())
	// Between an eviction and the add it evicts the failures may be off by
	// the adds in progress; never report fewer than none or more than all.
	return o, min(max(f, failureBias)-failureBias, o)
}

// Reset forgets every outcome.
func (c *Count) Reset() {
	for {
		t := c.totals.Load()
		g, _, _ := unpackTotals(t)
		if c.totals.CompareAndSwap(t, packTotals((g+1)&genMask, 0, failureBias)) {
			return
		}
	}
}
