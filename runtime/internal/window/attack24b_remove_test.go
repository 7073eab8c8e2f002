package window

import (
	"testing"
	"time"
)

// TestTimeRemoveTakesBackWhatAddCountedAtTheSameTime: a count given back
// leaves its bucket as it was before the add; one whose bucket moved on
// (a window later) or that would go below zero changes nothing else.
func TestTimeRemoveTakesBackWhatAddCountedAtTheSameTime(t *testing.T) {
	w := NewTime(10 * time.Second) // 1 s per bucket
	w.Add(2*sec, 3, 2)
	w.Remove(2*sec+sec/2, 0, 1) // same bucket
	if a, b := w.Sum(3 * sec); a != 3 || b != 1 {
		t.Errorf("after one given back: Sum = (%d, %d), want (3, 1)", a, b)
	}
	w.Remove(2*sec, 1, 5) // more than it holds: down to zero, never wrapped
	if a, b := w.Sum(3 * sec); a != 2 || b != 0 {
		t.Errorf("after more given back than held: Sum = (%d, %d), want (2, 0)", a, b)
	}
	w.Add(12*sec, 4, 4) // the same slot, a window later
	w.Remove(2*sec, 1, 1)
	if a, b := w.Sum(12 * sec); a != 4 || b != 4 {
		t.Errorf("a give-back of an old epoch took from the new one: Sum = (%d, %d), want (4, 4)", a, b)
	}
	w.Remove(-1, 1, 1) // a negative reading counts at 0: an empty bucket
	if a, b := w.Sum(12 * sec); a != 4 || b != 4 {
		t.Errorf("Sum = (%d, %d), want (4, 4)", a, b)
	}
}
