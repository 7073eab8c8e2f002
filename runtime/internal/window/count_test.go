package window

import (
	"strings"
	"sync"
	"testing"
)

func mustCount(t testing.TB, n int) *Count {
	t.Helper()
	c, err := NewCount(n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCountHoldsTheLastN(t *testing.T) {
	c := mustCount(t, 4)
	want := []struct{ outcomes, failures uint64 }{
		{1, 1}, // F
		{2, 1}, // F S
		{3, 2}, // F S F
		{4, 2}, // F S F S
		{4, 1}, // S F S S: the first F is evicted
		{4, 1}, // F S S S
		{4, 0}, // S S S S
	}
	outcomes := []bool{true, false, true, false, false, false, false}
	for i, failure := range outcomes {
		var f uint64
		if failure {
			f = 1
		}
		c.Add(int64(i), 1, f)
		o, fl := c.Sum(0)
		if o != want[i].outcomes || fl != want[i].failures {
			t.Errorf("after add %d: Sum = (%d, %d), want (%d, %d)", i, o, fl, want[i].outcomes, want[i].failures)
		}
	}
}

func TestCountIgnoresTime(t *testing.T) {
	c := mustCount(t, 3)
	c.Add(0, 1, 1)
	c.Add(int64(1)<<62, 1, 0)
	if o, f := c.Sum(-5); o != 2 || f != 1 {
		t.Errorf("Sum = (%d, %d), want (2, 1): a count window never ages its outcomes out", o, f)
	}
}

func TestCountResetStartsEmpty(t *testing.T) {
	c := mustCount(t, 3)
	c.Add(0, 3, 3)
	c.Reset()
	if o, f := c.Sum(0); o != 0 || f != 0 {
		t.Fatalf("after Reset Sum = (%d, %d), want (0, 0)", o, f)
	}
	// Slots of the old generation count as empty: the first add after the
	// reset is one outcome, not a replacement of an old failure.
	c.Add(0, 1, 0)
	if o, f := c.Sum(0); o != 1 || f != 0 {
		t.Errorf("Sum = (%d, %d), want (1, 0)", o, f)
	}
	c.Add(0, 3, 1) // F S S: the ring of three now holds exactly these
	if o, f := c.Sum(0); o != 3 || f != 1 {
		t.Errorf("Sum = (%d, %d), want (3, 1)", o, f)
	}
}

func TestCountManyResetsWrapTheGeneration(t *testing.T) {
	c := mustCount(t, 2)
	for i := range 3 * (genMask + 1) {
		c.Add(0, 1, uint64(i%2))
		if i%5 == 0 {
			c.Reset()
			if o, f := c.Sum(0); o != 0 || f != 0 {
				t.Fatalf("reset %d: Sum = (%d, %d), want (0, 0)", i, o, f)
			}
		}
	}
}

func TestCountAddManyAtOnce(t *testing.T) {
	c := mustCount(t, 5)
	c.Add(0, 8, 4) // F F F F S S S S: the last five are F S S S S
	if o, f := c.Sum(0); o != 5 || f != 1 {
		t.Errorf("Sum = (%d, %d), want (5, 1)", o, f)
	}
	c.Add(0, 2, 9) // more failures than outcomes: both are failures
	if o, f := c.Sum(0); o != 5 || f != 2 {
		t.Errorf("Sum = (%d, %d), want (5, 2)", o, f)
	}
	c.Add(0, 0, 3) // no outcome, no change
	if o, f := c.Sum(0); o != 5 || f != 2 {
		t.Errorf("Sum = (%d, %d), want (5, 2)", o, f)
	}
	c.Add(0, 1<<40, 1<<40) // a huge add records only n
	if o, f := c.Sum(0); o != 5 || f != 5 {
		t.Errorf("Sum = (%d, %d), want (5, 5)", o, f)
	}
}

func TestNewCountRefusesBadSizes(t *testing.T) {
	for _, n := range []int{0, -1, MaxCount + 1} {
		c, err := NewCount(n)
		if err == nil || c != nil {
			t.Errorf("NewCount(%d) = %v, %v; want an error", n, c, err)
			continue
		}
		if !strings.Contains(err.Error(), "between 1 and") {
			t.Errorf("NewCount(%d) error %q does not say what is valid", n, err)
		}
	}
	if c, err := NewCount(MaxCount); err != nil || c.Len() != MaxCount {
		t.Errorf("NewCount(MaxCount) = %v, %v", c, err)
	}
}

// The total a Count keeps must equal the content of its ring once the adds
// have finished, whatever they raced with.
func TestCountConcurrentAddsAndResetsKeepTotalsExact(t *testing.T) {
	c := mustCount(t, 64)
	const goroutines, adds = 8, 5000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range adds {
				c.Add(0, 1, uint64((g+i)%3/2))
				if g == 0 && i%500 == 0 {
					c.Reset()
				}
			}
		})
	}
	wg.Wait()
	o, f := c.Sum(0)
	gen, _, biased := unpackTotals(c.totals.Load())
	var ro, rf uint64
	for i := range c.slots {
		v := c.slots[i].Load()
		if v&slotFull != 0 && uint64(v>>2) == gen {
			ro++
			rf += uint64(v & slotFailure)
		}
	}
	if o != ro || f != rf || biased-failureBias != rf {
		t.Errorf("Sum = (%d, %d), ring holds (%d, %d): the running total drifted", o, f, ro, rf)
	}
	// No reset after the last 500 adds of goroutine 0, and 8 goroutines wrote
	// far more than 64 adds since: the ring is full.
	if o != 64 {
		t.Errorf("outcomes = %d, want a full ring of 64", o)
	}
}

func TestCountConcurrentFailuresAllCounted(t *testing.T) {
	c := mustCount(t, 1000)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 100 {
				c.Add(0, 1, 1)
			}
		})
	}
	wg.Wait()
	if o, f := c.Sum(0); o != 1000 || f != 1000 {
		t.Errorf("Sum = (%d, %d), want (1000, 1000)", o, f)
	}
}

// The interleavings a concurrent add can meet, played step by step: write
// is an add's move on its slot, apply its move on the totals.
func TestCountInterleavings(t *testing.T) {
	t.Run("a reset between reading the generation and writing the slot", func(t *testing.T) {
		c := mustCount(t, 2)
		c.Reset()                                 // generation 1
		c.Add(0, 1, 1)                            // slot 0 holds a failure of generation 1
		c.head.Store(0)                           // the stale add below aims at slot 0 too
		if _, _, ok := c.write(0, 0, false); ok { // an add that read generation 0
			t.Fatal("a stale add overwrote a slot of a newer generation")
		}
		if o, f := c.Sum(0); o != 1 || f != 1 {
			t.Errorf("Sum = (%d, %d), want (1, 1)", o, f)
		}
	})
	t.Run("a reset between writing the slot and moving the totals", func(t *testing.T) {
		c := mustCount(t, 2)
		dO, dF, ok := c.write(0, 0, true)
		c.Reset()
		c.apply(0, dO, dF) // generation 0's move: dropped
		if !ok {
			t.Fatal("write refused on an empty slot")
		}
		if o, f := c.Sum(0); o != 0 || f != 0 {
			t.Errorf("Sum = (%d, %d), want (0, 0) after the reset", o, f)
		}
		// The old failure in slot 0 counts as empty in generation 1.
		c.head.Store(0)
		c.Add(0, 1, 0)
		if o, f := c.Sum(0); o != 1 || f != 0 {
			t.Errorf("Sum = (%d, %d), want (1, 0)", o, f)
		}
	})
	t.Run("an eviction applied before the add it evicts", func(t *testing.T) {
		c := mustCount(t, 1)
		dO1, dF1, _ := c.write(0, 0, true)  // a failure, its totals not yet moved…
		dO2, dF2, _ := c.write(0, 0, false) // …evicted by a success that moves first
		c.apply(0, dO2, dF2)
		if o, f := c.Sum(0); o != 0 || f != 0 {
			t.Errorf("between the two moves Sum = (%d, %d), want (0, 0): never fewer than no failures", o, f)
		}
		c.apply(0, dO1, dF1)
		if o, f := c.Sum(0); o != 1 || f != 0 {
			t.Errorf("Sum = (%d, %d), want (1, 0): the ring holds one success", o, f)
		}
	})
}
