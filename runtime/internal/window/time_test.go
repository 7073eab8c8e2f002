package window

import (
	"sync"
	"testing"
	"time"
)

const sec = int64(time.Second)

func bucketAt(w *Time, i int) (epoch, a, b uint64) { return unpack(w.buckets[i].Load()) }

func TestTimeAddLandsInBucket(t *testing.T) {
	w := NewTime(10 * time.Second) // 1 s per bucket
	w.Add(2500*sec/1000, 1, 2)
	w.Add(2999*sec/1000, 3, 0)
	w.Add(13*sec, 4, 5) // epoch 13: slot 3
	for i := range w.buckets {
		e, a, b := bucketAt(w, i)
		switch i {
		case 2:
			if e != 2 || a != 4 || b != 2 {
				t.Errorf("bucket 2 = (epoch %d, %d, %d), want (2, 4, 2)", e, a, b)
			}
		case 3:
			if e != 13 || a != 4 || b != 5 {
				t.Errorf("bucket 3 = (epoch %d, %d, %d), want (13, 4, 5)", e, a, b)
			}
		default:
			if e != 0 || a != 0 || b != 0 {
				t.Errorf("bucket %d = (epoch %d, %d, %d), want untouched", i, e, a, b)
			}
		}
	}
}

func TestTimeSumCountsOnlyBucketsInWindow(t *testing.T) {
	w := NewTime(10 * time.Second)
	if w.BucketWidth() != time.Second {
		t.Fatalf("BucketWidth = %v, want 1s", w.BucketWidth())
	}
	for s := range int64(15) { // one add per second, 0 s … 14 s, a = s+1, b = 1
		w.Add(s*sec, uint64(s+1), 1)
	}
	// At 14.5 s the window holds the buckets of 5 s … 14 s.
	var wantA uint64
	for s := uint64(5); s <= 14; s++ {
		wantA += s + 1
	}
	if a, b := w.Sum(14*sec + sec/2); a != wantA || b != 10 {
		t.Errorf("Sum at 14.5s = (%d, %d), want (%d, 10)", a, b, wantA)
	}
	if a, b := w.Sum(23 * sec); a != 15 || b != 1 {
		t.Errorf("Sum at 23s = (%d, %d), want (15, 1)", a, b)
	}
	if a, b := w.Sum(24 * sec); a != 0 || b != 0 {
		t.Errorf("Sum at 24s = (%d, %d), want (0, 0)", a, b)
	}
	// Epochs in the future of now are not counted.
	if a, b := w.Sum(3 * sec); a != 0 || b != 0 {
		t.Errorf("Sum at 3s = (%d, %d), want (0, 0)", a, b)
	}
}

func TestTimeReusedBucketStartsFromZero(t *testing.T) {
	w := NewTime(10 * time.Second)
	w.Add(1*sec, 5, 5)
	w.Add(11*sec, 1, 0) // same slot, new epoch
	if a, b := w.Sum(11 * sec); a != 1 || b != 0 {
		t.Errorf("Sum = (%d, %d), want (1, 0)", a, b)
	}
}

func TestTimeLateReadingKeepsNewerBucket(t *testing.T) {
	w := NewTime(10 * time.Second)
	w.Add(11*sec, 3, 1) // slot 1, epoch 11
	// A reading of 1 s arrives late (a call that started then): its slot
	// holds epoch 11, so it is a whole window old and must not wipe it.
	w.Add(1*sec, 5, 5)
	if e, a, b := bucketAt(w, 1); e != 11 || a != 3 || b != 1 {
		t.Errorf("bucket 1 = (epoch %d, %d, %d), want (11, 3, 1)", e, a, b)
	}
	// A late reading whose slot is older or empty is counted as usual.
	w.Add(12*sec, 1, 0)
	w.Add(2*sec, 1, 1) // slot 2 holds epoch 12: dropped
	w.Add(9*sec, 2, 0) // slot 9 empty: counted
	if a, b := w.Sum(12 * sec); a != 3+1+2 || b != 1 {
		t.Errorf("sum at 12s = (%d, %d), want (6, 1)", a, b)
	}
	// After a reset the slots hold epoch 0 and no counts: nothing is ahead,
	// however far on the clock is (here past half the epoch range).
	w.Reset()
	far := int64(1<<(epochBits-1)+5) * w.width
	w.Add(far, 1, 0)
	if a, _ := w.Sum(far); a != 1 {
		t.Errorf("after reset, sum far on = %d, want 1", a)
	}
}

func TestTimeFullBucketDropsAddsWhole(t *testing.T) {
	w := NewTime(10 * time.Second)
	w.Add(7*sec, MaxBucketCount-1, 0)
	w.Add(7*sec, 5, MaxBucketCount+100) // would pass MaxBucketCount: dropped
	w.Add(7*sec, 1, 1)
	w.Add(7*sec, 1, 0)         // a is full: dropped, b untouched
	w.Add(7*sec, 1<<63, 1<<63) // must not wrap around to a small count
	// The adds that would pass MaxBucketCount are dropped whole (both
	// counts), so nothing spills and the ratio b/a is kept.
	if a, b := w.Sum(7 * sec); a != MaxBucketCount || b != 1 {
		t.Errorf("Sum = (%d, %d), want (%d, 1): an add that would pass MaxBucketCount is dropped whole", a, b, MaxBucketCount)
	}
	if MaxBucketCount != 1<<20-1 {
		t.Errorf("MaxBucketCount = %d, want 2^20-1", MaxBucketCount)
	}
}

func TestTimeNegativeTimeTinyWidthAndReset(t *testing.T) {
	w := NewTime(5)
	if w.BucketWidth() != 1 {
		t.Fatalf("BucketWidth = %v, want 1ns", w.BucketWidth())
	}
	w.Add(-10, 1, 1)
	if a, b := w.Sum(-3); a != 1 || b != 1 {
		t.Errorf("Sum = (%d, %d), want (1, 1)", a, b)
	}
	w.Reset()
	if a, b := w.Sum(0); a != 0 || b != 0 {
		t.Errorf("after Reset Sum = (%d, %d), want (0, 0)", a, b)
	}
}

func TestTimeConcurrentAddsLoseNothing(t *testing.T) {
	w := NewTime(10 * time.Second)
	const goroutines, adds = 16, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range adds {
				now := 10*sec + int64((g*adds+i)%100)*(sec/10)
				w.Add(now, 1, uint64(i%2))
			}
		})
	}
	wg.Wait()
	if a, b := w.Sum(19 * sec); a != goroutines*adds || b != goroutines*adds/2 {
		t.Errorf("Sum = (%d, %d), want (%d, %d)", a, b, goroutines*adds, goroutines*adds/2)
	}
}

// TestLastingKeepsBForTheWholeWindow: a window from NewLasting(d), read
// with SumSplit, still holds b at every moment up to d after it was added,
// wherever in its bucket it fell, and no longer holds a at any moment more
// than d after it (a retry budget's retries and requests).
func TestLastingKeepsBForTheWholeWindow(t *testing.T) {
	for _, d := range []time.Duration{10, 99, 100, 1000, 10 * time.Second} {
		width := int64(NewLasting(d).BucketWidth())
		for _, at := range []int64{0, 1, width - 1, width, 5*width + width/2, 7*width - 1} {
			w := NewLasting(d)
			w.Add(at, 1, 1)
			for now := at; now <= at+2*int64(d); now += max(int64(d)/50, 1) {
				a, b := w.SumSplit(now)
				if now-at <= int64(d) && b != 1 {
					t.Fatalf("d=%v, added at %d: b gone at %d, %v later (want it for the whole window)", d, at, now, time.Duration(now-at))
				}
				if now-at > int64(d)+int64(Buckets) && a != 0 {
					t.Fatalf("d=%v, added at %d: a still counted at %d, %v later (want it gone after the window)", d, at, now, time.Duration(now-at))
				}
			}
			// The last moment of the window itself, whatever the step.
			if _, b := w.SumSplit(at + int64(d)); b != 1 {
				t.Fatalf("d=%v, added at %d: b gone exactly d later", d, at)
			}
		}
	}
}
