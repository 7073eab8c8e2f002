package adaptive

import (
	"math"
	"math/bits"
)

const (
	// baselineBuckets is the number of buckets of the baseline window.
	baselineBuckets = 10
	// baselineBins is the number of bins of a bucket's histogram, each a
	// sixteenth of an octave wide (at most 6.25 % of its lower edge),
	// centred on the baseline the bucket began under: two octaves either
	// side of it, the RTTs beyond in the end bins.
	baselineBins = 64
	// baselineRounds is the number of rounds the bucket of the current
	// stretch holds before its percentile counts: a bucket of the past
	// counts whatever it holds (a stretch of sparse calls says as much of
	// the dependency's latency as a busy one).
	baselineRounds = 16
	// baselinePercentile is the percentile of a bucket's round RTTs that
	// counts: the ⌈n / baselinePercentile⌉-th smallest of its n rounds,
	// its 10th percentile.
	baselinePercentile = 10
)

// baseline is the dependency's latency without queueing, over a sliding
// window of time in baselineBuckets buckets: the smallest of an anchor
// (the RTT of the round a restart, or an empty window, started it from,
// kept while the window holds rounds)
// and of each bucket's 10th percentile of its round RTTs (the current
// bucket's once it holds baselineRounds rounds; a past bucket's whatever
// it holds, its median below baselineRounds: bucketRank); the smallest
// round RTT of the window when neither is there.
// It is guarded by the limiter's mutex.
type baseline struct {
	width  int64 // nanoseconds per bucket
	anchor struct {
		epoch int64 // now / width when it was set; -1 for none
		rtt   int64
		// low is the reading of the anchor's bucket (its percentile, or
		// its median below baselineRounds), the anchor once that bucket
		// has left the window.
		low int64
	}
	buckets [baselineBuckets]baselineBucket
}

// baselineBucket is one stretch of the window: its rounds' RTTs in a
// histogram of bins centred on the baseline it began under (see add).
type baselineBucket struct {
	epoch  int64 // now / width of the rounds kept; -1 for none
	least  int64 // the smallest RTT kept, nanoseconds
	low    int64 // the bucket's percentile
	origin int   // the index (binIndex) of bin 0
	rounds int   // the rounds kept: the sum of bins
	// bins count the rounds: a bin of 32 bits fills after 2^32 rounds,
	// at least 1.4 billion a second in a bucket of 3 s, which no round
	// trip allows.
	bins [baselineBins]uint32
}

func newBaseline(window int64) baseline {
	b := baseline{width: max(window/baselineBuckets, 1)}
	b.anchor.epoch = -1
	for i := range b.buckets {
		b.buckets[i].epoch = -1
	}
	return b
}

// binIndex is the bin of a log-linear scale that rtt falls in: sixteen
// bins an octave, each 1/16 of the octave's lower end wide, so that a bin's
// lower edge (binEdge) is within 1/16 of any RTT in it. An RTT below 1
// counts as 1.
func binIndex(rtt int64) int {
	v := uint64(max(rtt, 1))
	e := bits.Len64(v) - 1
	var m uint64
	if e >= 4 {
		m = v >> (e - 4) & 15
	} else {
		m = v << (4 - e) & 15
	}
	return e<<4 | int(m)
}

// binEdge is the smallest RTT of bin i.
func binEdge(i int) int64 {
	e, m := i>>4, int64(i&15)
	if e >= 4 {
		return (16 + m) << (e - 4)
	}
	return (16 + m) >> (4 - e)
}

// live reports whether a bucket or anchor of epoch e is within the window
// that ends in epoch q.
func live(e, q int64) bool {
	return e >= 0 && e <= q && q-e < baselineBuckets
}

// observe adds the RTT of a round that ended at now (nanoseconds since the
// clock base, not negative) and returns the baseline of the window ending
// at now, this round included. A round in a window that holds no other is
// its anchor, as after a restart.
func (b *baseline) observe(now, rtt int64) int64 {
	q := now / b.width
	if !b.occupied(q) {
		b.anchor.epoch, b.anchor.rtt = q, rtt
	}
	b.add(q, rtt)
	return b.at(q)
}

// occupied reports whether a bucket of the window that ends in epoch q
// holds rounds.
func (b *baseline) occupied(q int64) bool {
	for i := range b.buckets {
		if live(b.buckets[i].epoch, q) {
			return true
		}
	}
	return false
}

// at returns the baseline of the window that ends in epoch q: the
// smallest of the anchor and of the percentiles of the buckets of the
// past and of the current bucket once it holds baselineRounds rounds;
// without any, the smallest RTT kept; without that, math.MaxInt64. The
// anchor counts for as long as the window holds rounds, not only for the
// window after it was set: a queue that follows a spell of few calls, or
// that lasts longer than the window, leaves the baseline where the
// anchor put it (TestAttack30dQueueAfterAnIdleSpellShorterThanTheWindow:
// a queue from 28 s after one call at 1 s moved it from 40 to 54.5 ms
// once that call left the window); only a restart, or a window that
// empties, sets another. Its first round counts while its bucket is in the
// window; after it, the bucket's reading: a first round that was lucky
// (a warm cache's answer) would otherwise hold the baseline below the
// dependency's latency for as long as calls come
// (TestAttack30eLuckyAnchorOutlivesTheWindow: a first answer of 12.9 ms
// among answers of 20 ms held the limit at 41 of 100).
func (b *baseline) at(q int64) int64 {
	least, counted := int64(math.MaxInt64), false
	if e := b.anchor.epoch; e >= 0 && e <= q {
		switch {
		case live(e, q):
			least, counted = b.anchor.rtt, true
		case b.occupied(q):
			least, counted = b.anchor.low, true
		}
	}
	for i := range b.buckets {
		if s := &b.buckets[i]; live(s.epoch, q) && (s.epoch < q || s.rounds >= baselineRounds) {
			least, counted = min(least, s.low), true
		}
	}
	if !counted {
		for i := range b.buckets {
			if s := &b.buckets[i]; live(s.epoch, q) {
				least = min(least, s.least)
			}
		}
	}
	return least
}

// add keeps rtt in the bucket of epoch q, and updates its percentile.
// A new bucket's bins are centred on the baseline it begins under (its
// first round when there is none: the first round of an empty window, or
// a restart's, which is then the anchor): a dependency's rounds are near
// its baseline when it does not queue, above it when it does, and a first
// round far from the others (a lucky one) would have left them all in an
// end bin, read at its edge (TestAttack30cBucketWhoseFirstRoundIsFarFromTheRest:
// 3.8 ms for rounds of 20 ms after one of 1 ms).
func (b *baseline) add(q, rtt int64) {
	s := &b.buckets[q%baselineBuckets]
	if s.epoch != q {
		ref := b.at(q) // without s, whose epoch is not in the window
		if ref == math.MaxInt64 {
			ref = rtt
		}
		s.epoch, s.least, s.rounds, s.origin = q, rtt, 0, binIndex(ref)-baselineBins/2
		s.bins = [baselineBins]uint32{}
	}
	i := binIndex(rtt)
	s.least = min(s.least, rtt)
	i = min(max(i-s.origin, 0), baselineBins-1)
	s.bins[i]++
	s.rounds++
	// The ⌈n/10⌉-th smallest RTT is in bin j; read as the bin's lower
	// edge, or the smallest RTT kept if that is in bin j or above the
	// edge (so that a bin is never read above an RTT in it, and rounds
	// of one RTT read that RTT).
	rank := bucketRank(s.rounds)
	j := 0
	for n := int(s.bins[0]); n < rank; n += int(s.bins[j]) {
		j++
	}
	least := min(max(binIndex(s.least)-s.origin, 0), baselineBins-1)
	if j == least {
		s.low = s.least
	} else {
		s.low = max(s.least, binEdge(s.origin+j))
	}
	if q == b.anchor.epoch {
		b.anchor.low = s.low
	}
}

// bucketRank is the rank, from 1, of the RTT a bucket of n rounds
// counts with: the ⌈n/10⌉-th smallest, its 10th percentile, from
// baselineRounds rounds on; below, the median, the ⌈n/2⌉-th: the fastest
// of a handful of rounds is luck, and with wide spreads a window of
// sparse buckets would have the luckiest of them all as its baseline,
// while a sparse bucket's median still holds the baseline down against
// a queue that follows it.
func bucketRank(n int) int {
	if n < baselineRounds {
		return (n + 1) / 2
	}
	return (n + baselinePercentile - 1) / baselinePercentile
}

// restart forgets every RTT kept and makes rtt, of a round that ended at
// now, the anchor: the baseline is rtt until rounds faster than it come
// (a tenth of the current bucket's rounds, once it holds baselineRounds,
// or of a past bucket's) or the window forgets it.
func (b *baseline) restart(now, rtt int64) {
	for i := range b.buckets {
		b.buckets[i].epoch = -1
	}
	q := now / b.width
	b.anchor.epoch, b.anchor.rtt = q, rtt
	b.add(q, rtt)
}
