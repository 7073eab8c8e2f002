package window

import (
	"testing"
	"time"
)

// A window whose client was idle for a long stretch counts what it is
// given again. The epochs of the buckets wrap after 2^24 buckets; before,
// a bucket last written between 2^23 and 2^24 buckets ago looked "ahead"
// of now, and every add that fell in it was dropped as a late reading: a
// breaker, budget or throttler window of 1 s (100 ms buckets) idle for ten
// days counted nothing for the next ten.
func TestAttack24gLongIdleWindowCountsAgain(t *testing.T) {
	const width = int64(100 * time.Millisecond)
	for _, idle := range []int64{
		1 << 23, 1<<23 + 1, 1<<23 + 5, 3 << 22, 1<<24 - 20, 1<<24 - 5,
		1 << 24, 1<<24 + 3, 1<<24 + 9, 5 << 23, 1 << 30,
	} {
		w := NewTime(time.Second)
		for i := range int64(Buckets) { // a busy second: every bucket holds counts
			w.Add(i*width, 7, 3)
		}
		q := int64(Buckets-1) + idle // a bucket index idle buckets after the last add
		if a, b := w.Sum(q * width); a != 0 || b != 0 {
			t.Errorf("idle %d buckets: Sum before any add = (%d, %d), want (0, 0): counts a whole window old", idle, a, b)
		}
		for i := range int64(Buckets) {
			w.Add((q+i)*width, 2, 1)
		}
		if a, b := w.Sum((q + Buckets - 1) * width); a != 2*Buckets || b != Buckets {
			t.Errorf("idle %d buckets: Sum after 10 adds of (2, 1) = (%d, %d), want (%d, %d)", idle, a, b, 2*Buckets, Buckets)
		}
	}
}

// A late reading, taken before a long call, still may not wipe the newer
// counts of its slot, however large the clock.
func TestAttack24gLateReadingAfterLongIdleKeepsNewerBucket(t *testing.T) {
	const width = int64(100 * time.Millisecond)
	w := NewTime(time.Second)
	w.Add(0, 5, 5)
	q := int64(1<<23 + 77)
	w.Add(q*width, 1, 0)
	w.Add((q-Buckets)*width, 9, 9) // a whole window late
	w.Add((q-3*Buckets)*width, 9, 9)
	if a, b := w.Sum(q * width); a != 1 || b != 0 {
		t.Errorf("Sum = (%d, %d), want (1, 0): late readings must neither count nor wipe", a, b)
	}
}
