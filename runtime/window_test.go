package runtime

import (
	"sync"
	"testing"
	"time"
)

func bucketAt(w *window, i int) (epoch, a, b uint64) { return unpack(w.buckets[i].Load()) }

func TestWindowAddLandsInBucket(t *testing.T) {
	w := newWindow(10 * time.Second) // 1 s per bucket
	if w.width != int64(time.Second) {
		t.Fatalf("width = %d, want 1s", w.width)
	}
	w.add(int64(2500*time.Millisecond), 1, 2)
	w.add(int64(2999*time.Millisecond), 3, 0)
	w.add(int64(13*time.Second), 4, 5) // epoch 13: slot 3
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

func TestWindowSumCountsOnlyBucketsInWindow(t *testing.T) {
	w := newWindow(10 * time.Second)
	for s := range 15 { // one add per second, 0 s … 14 s, a = s+1, b = 1
		w.add(int64(s)*int64(time.Second), uint64(s+1), 1)
	}
	// At 14.5 s the window holds the buckets of 5 s … 14 s.
	a, b := w.sum(int64(14500 * time.Millisecond))
	var wantA uint64
	for s := 5; s <= 14; s++ {
		wantA += uint64(s + 1)
	}
	if a != wantA || b != 10 {
		t.Errorf("sum at 14.5s = (%d, %d), want (%d, 10)", a, b, wantA)
	}
	// Later still, only the youngest buckets count; long after, none.
	if a, b := w.sum(int64(23 * time.Second)); a != 15 || b != 1 {
		t.Errorf("sum at 23s = (%d, %d), want (15, 1)", a, b)
	}
	if a, b := w.sum(int64(24 * time.Second)); a != 0 || b != 0 {
		t.Errorf("sum at 24s = (%d, %d), want (0, 0)", a, b)
	}
	// Every slot now holds an epoch from 5 s on: a sum at 3 s sees only
	// epochs in its future and counts none of them.
	if a, b := w.sum(int64(3 * time.Second)); a != 0 || b != 0 {
		t.Errorf("sum at 3s = (%d, %d), want (0, 0)", a, b)
	}
}

func TestWindowReusedBucketStartsFromZero(t *testing.T) {
	w := newWindow(10 * time.Second)
	w.add(int64(1*time.Second), 5, 5)
	w.add(int64(11*time.Second), 1, 0) // same slot, new epoch
	if e, a, b := bucketAt(w, 1); e != 11 || a != 1 || b != 0 {
		t.Errorf("bucket 1 = (epoch %d, %d, %d), want (11, 1, 0)", e, a, b)
	}
	if a, b := w.sum(int64(11 * time.Second)); a != 1 || b != 0 {
		t.Errorf("sum = (%d, %d), want (1, 0)", a, b)
	}
}

func TestWindowSaturates(t *testing.T) {
	w := newWindow(10 * time.Second)
	now := int64(7 * time.Second)
	w.add(now, countMax-1, 0)
	w.add(now, 5, countMax+100)
	w.add(now, 1, 1)
	w.add(now, 1, 0)
	e, a, b := bucketAt(w, 7)
	// The second add and the last would pass countMax: each is dropped
	// whole (both counts), so nothing spills and the ratio b/a is kept.
	if e != 7 || a != countMax || b != 1 {
		t.Errorf("bucket = (epoch %d, %d, %d), want (7, %d, 1): an add that would pass countMax is dropped whole, without spilling",
			e, a, b, countMax)
	}
	if countMax != 1<<20-1 {
		t.Errorf("countMax = %d, want 2^20-1", countMax)
	}
}

func TestWindowNegativeTimeAndTinyWidth(t *testing.T) {
	w := newWindow(5) // 5 ns over 10 buckets: width clamped to 1 ns
	if w.width != 1 {
		t.Fatalf("width = %d, want 1", w.width)
	}
	w.add(-10, 1, 1) // before the base: counted at 0
	if a, b := w.sum(-3); a != 1 || b != 1 {
		t.Errorf("sum = (%d, %d), want (1, 1)", a, b)
	}
	w.reset()
	if a, b := w.sum(0); a != 0 || b != 0 {
		t.Errorf("after reset sum = (%d, %d), want (0, 0)", a, b)
	}
}

func TestWindowConcurrentAddsLoseNothing(t *testing.T) {
	w := newWindow(10 * time.Second)
	const goroutines, adds = 64, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range adds {
				// Spread over the buckets of 10 s … 19.9 s, b on every other add.
				now := int64(10*time.Second) + int64((g*adds+i)%100)*int64(100*time.Millisecond)
				w.add(now, 1, uint64(i%2))
			}
		})
	}
	wg.Wait()
	a, b := w.sum(int64(19 * time.Second))
	if a != goroutines*adds || b != goroutines*adds/2 {
		t.Errorf("sum = (%d, %d), want (%d, %d)", a, b, goroutines*adds, goroutines*adds/2)
	}
}
