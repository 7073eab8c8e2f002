package adaptive

import (
	"math"
	"testing"
	"time"
)

// Attack 30c: a bucket's histogram (baseline.go, as it was: 64 bins of
// 1/16 octave centred on the bucket's first round, 16-bit counts halved
// when one fills; both mended since). README "Adaptive concurrency limit": "A bucket's rounds are
// counted in 64 bins of a sixteenth of an octave around its first round,
// so its percentile is read to within 6 %, never above it".

// atk30cBucket returns a baseline of the default window whose bucket 0
// holds rtts, in order, its anchor put aside.
func atk30cBucket(rtts ...[2]int64) *baseline {
	b := newBaseline(int64(30 * time.Second))
	for _, r := range rtts {
		for range r[0] {
			b.observe(int64(time.Second), r[1])
		}
	}
	b.anchor.epoch = -1
	return &b
}

// TestAttack30cBucketWhoseFirstRoundIsFarFromTheRest: a bucket whose first
// round is a lucky one, 1 ms (a round of one cached answer), and whose 99
// others are 20 ms: its 10th percentile is 20 ms, and the bins, placed two
// octaves either side of 1 ms, put all 99 in the top bin, read as its
// lower edge, 3.80 ms: 81 % low, not within 6 %. The same round second in
// its bucket reads 20 ms. In the limiter (rounds of 16 calls at 20 ms, no
// queue): the lucky round first in the bucket of 36–39 s takes the
// baseline to 3.80 ms, the rounds read 5.3 times it, the limit falls from
// 16 to 9 and stays below 16 for 6 rounds until the not-queueing rule
// restarts the baseline; the same round 20 ms later (second in its
// bucket) moves nothing. The bins' placement decides whether one lucky
// round in a hundred counts as the smallest round of the window did.
//
// Fixed since: a bucket's bins are centred on the baseline it begins
// under, not on its first round. (A first round in an empty window is the
// anchor, and the baseline, whatever the bins read: the histogram is
// checked here in the second bucket of a window whose first holds rounds
// of 20 ms.)
func TestAttack30cBucketWhoseFirstRoundIsFarFromTheRest(t *testing.T) {
	bucket := func(rtts ...[2]int64) time.Duration {
		b := newBaseline(int64(30 * time.Second))
		for range 20 {
			b.observe(int64(time.Second), int64(20*ms))
		}
		for _, r := range rtts {
			for range r[0] {
				b.observe(int64(4*time.Second), r[1])
			}
		}
		return time.Duration(b.buckets[1].low)
	}
	gotFirst := bucket([2]int64{1, int64(ms)}, [2]int64{99, int64(20 * ms)})
	gotSecond := bucket([2]int64{1, int64(20 * ms)}, [2]int64{1, int64(ms)}, [2]int64{98, int64(20 * ms)})

	limiter := func(lucky time.Duration) (low, below int) {
		l := mustNew(t, Policy{MaxLimit: 16, InitialLimit: 16})
		low = 16
		for now := 20 * ms; now < 70*time.Second; now += 20 * ms {
			rtt := 20 * ms
			if now == lucky {
				rtt = ms
			}
			atk29cRound(t, l, l.Limit(), rtt, now)
			if now > lucky {
				low = min(low, l.Limit())
				if l.Limit() < 16 {
					below++
				}
			}
		}
		return low, below
	}
	lowFirst, belowFirst := limiter(36 * time.Second)
	lowSecond, belowSecond := limiter(36*time.Second + 20*ms)
	t.Logf("1 ms then 99 × 20 ms: read %v; 20 ms, 1 ms, then 98 × 20 ms: read %v (exact 10th percentile 20 ms in both)", gotFirst, gotSecond)
	t.Logf("limiter, one 1 ms round among 20 ms ones: first in its bucket, the limit fell to %d and was below 16 for %d rounds; second in it, %d and %d",
		lowFirst, belowFirst, lowSecond, belowSecond)
	if 16*gotFirst < 15*20*ms || lowFirst < 16 {
		t.Errorf("a bucket of 100 rounds, its 10th percentile 20 ms, whose first round was 1 ms reads %v (want within 6 %% of 20 ms); "+
			"in the limiter such a round first in its bucket took the limit from 16 to %d", gotFirst, lowFirst)
	}
	if 16*gotSecond < 15*20*ms || lowSecond < 16 {
		t.Errorf("the lucky round second in its bucket: read %v, limit down to %d; want 20 ms and 16", gotSecond, lowSecond)
	}
}

// TestAttack30cHalvedBinsWeighLaterRoundsMore: one bucket of 230000 rounds
// (a dependency of some 10 µs, 77000 rounds a second): 30000 at 10 µs, then
// 200000 at 40 µs (a queue building within the bucket). Its 10th
// percentile is 10 µs (the 23000th smallest). Each halving keeps the
// shares of the rounds counted so far, but the rounds after it count
// double: after the five halvings the 10 µs rounds weigh 937 of the 37097
// kept, under a tenth, and the bucket reads 36.9 µs (40 µs's bin), 3.7
// times its 10th percentile: above it, where the README says never.
// Fixed since: the bins count in 32 bits and are never halved (it reads
// 10 µs).
func TestAttack30cHalvedBinsWeighLaterRoundsMore(t *testing.T) {
	fast, slow := int64(10*time.Microsecond), int64(40*time.Microsecond)
	b := atk30cBucket([2]int64{30000, fast}, [2]int64{200000, slow})
	got := b.at(0)
	s := &b.buckets[0]
	t.Logf("30000 × 10 µs then 200000 × 40 µs: reads %v (exact 10th percentile 10 µs); bins kept %d rounds, the 10 µs bin %d",
		time.Duration(got), s.rounds, s.bins[binIndex(fast)-s.origin])
	if got > fast || got == math.MaxInt64 {
		t.Errorf("a bucket whose 10th percentile is 10 µs reads %v: above it", time.Duration(got))
	}
}
