package adaptive

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
)

// FuzzBaseline checks the baseline against the same rounds kept in full:
// the anchor (the value of the last restart, or the first round of an
// empty window) while the window holds rounds; each bucket of the
// window (the current one once it holds baselineRounds rounds, a past
// one whatever it holds) read as its exact 10th
// percentile (the ⌈n/10⌉-th smallest), at most it and less by no more
// than the histogram's resolution (1/16: a bin's lower edge is above 16/17
// of any RTT in it; no bound but the bucket's smallest for a percentile in
// an end bin, about two octaves or more from the baseline the bucket began
// under);
// without either, exactly the smallest round of the window; nothing of a
// round outside the window; a restart's value at once.
func FuzzBaseline(f *testing.F) {
	f.Add([]byte{9, 0, 40, 0, 44, 0, 38, 6, 3, 0, 200, 7, 50, 0, 41, 6, 90})
	// Twenty rounds a bucket, then two buckets of a spread, a restart,
	// and the window passing.
	seed := []byte{9}
	for i := range 200 {
		seed = append(seed, 0, byte(30+i*13%40))
		if i%20 == 19 {
			seed = append(seed, 6, 10)
		}
		if i == 120 {
			seed = append(seed, 7, 60)
		}
	}
	f.Add(append(seed, 6, 250, 6, 250, 0, 35))
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		window := (int64(prog.Next()%20) + 1) * int64(100*time.Millisecond)
		b := newBaseline(window)
		width := window / baselineBuckets
		type round struct{ at, rtt int64 }
		var rounds []round // since the last restart
		anchor := round{at: -1}
		// Each bucket's bins' origin: centred on the baseline it began
		// under, as the code read it just before (checked against the
		// rounds at the step before), or on its first round without one.
		origins := map[int64]int{}
		var now int64
		for step := 0; !prog.Done() && step < 4096; step++ {
			switch op := prog.Next() % 8; op {
			case 6:
				now += int64(prog.Next()) * width / 8
			default:
				// 0 to 5: a round; 7: a restart. An RTT of 10 µs to
				// 650 ms, most of them within a few octaves.
				x := int64(prog.Next())
				rtt := (x*x + 1) * int64(10*time.Microsecond)
				if op != 7 {
					q := now / width
					empty := true // no round in the window (the anchor's own included)
					for _, r := range rounds {
						if r.at >= 0 && q-r.at/width < baselineBuckets {
							empty = false
						}
					}
					if empty {
						anchor = round{now, rtt}
					}
					if _, ok := origins[q]; !ok || empty {
						ref := b.at(q)
						if empty || ref == math.MaxInt64 {
							ref = rtt
						}
						origins[q] = binIndex(ref) - baselineBins/2
					}
					b.observe(now, rtt)
					rounds = append(rounds, round{now, rtt})
				} else {
					b.restart(now, rtt)
					rounds, anchor = []round{{now, rtt}}, round{now, rtt}
					origins = map[int64]int{now / width: binIndex(rtt) - baselineBins/2}
					if got := b.at(now / width); got != rtt {
						t.Fatalf("step %d: restart at %v: baseline %v, want %v", step, now, got, rtt)
					}
				}
			}
			q := now / width
			live := func(at int64) bool { return at >= 0 && q-at/width < baselineBuckets }
			buckets := map[int64][]int64{}
			smallest := int64(math.MaxInt64)
			for _, r := range rounds {
				if live(r.at) {
					buckets[r.at/width] = append(buckets[r.at/width], r.rtt)
					smallest = min(smallest, r.rtt)
				}
			}
			lo, hi, counted := int64(math.MaxInt64), int64(math.MaxInt64), false
			// bounds are a bucket's reading's: at most its exact
			// percentile, less by no more than the bins' resolution.
			bounds := func(rtts []int64, origin int) (int64, int64) {
				sorted := slices.Sorted(slices.Values(rtts))
				p := sorted[bucketRank(len(sorted))-1]
				low := sorted[0]
				if j := binIndex(p) - origin; j > 0 && j < baselineBins-1 {
					// Within the bins, neither end's.
					low = max(low, int64(float64(p)*16/17))
				}
				return low, p
			}
			if anchor.at >= 0 && len(buckets) > 0 {
				// The anchor counts while the window holds rounds: its
				// first round while its bucket is in the window, then
				// that bucket's reading.
				if live(anchor.at) {
					lo, hi, counted = anchor.rtt, anchor.rtt, true
				} else {
					var rtts []int64
					for _, r := range rounds {
						if r.at/width == anchor.at/width {
							rtts = append(rtts, r.rtt)
						}
					}
					lo, hi = bounds(rtts, origins[anchor.at/width])
					counted = true
				}
			}
			for k, rtts := range buckets {
				if k == q && len(rtts) < baselineRounds {
					continue // the current bucket counts once it holds baselineRounds
				}
				low, p := bounds(rtts, origins[k])
				lo, hi, counted = min(lo, low), min(hi, p), true
			}
			if !counted {
				lo, hi = smallest, smallest
			}
			if got := b.at(q); got < lo || got > hi {
				t.Fatalf("step %d at %v (window %v): baseline %v, want within [%v, %v] (anchor %v at %v; live buckets %v)",
					step, time.Duration(now), time.Duration(window), time.Duration(got), time.Duration(lo), time.Duration(hi),
					time.Duration(anchor.rtt), time.Duration(anchor.at), buckets)
			}
		}
	})
}

// TestBaselineBinsAndOverflow: the log-linear bins at their edges (every
// RTT at or above its bin's lower edge and below the next bin's, within
// 1/16 of the edge), rounds of one RTT read as exactly it, and a bucket
// of more rounds than a 16-bit count holds keeps them all.
func TestBaselineBinsAndOverflow(t *testing.T) {
	for _, rtt := range []int64{1, 2, 3, 15, 16, 17, 31, 32, 33, 1000, 1023, 1024, 20_000_000, 20_971_520, int64(time.Hour)} {
		i := binIndex(rtt)
		if e := binEdge(i); e > rtt || 17*e < 16*rtt && rtt >= 16 {
			t.Errorf("RTT %d in bin %d of lower edge %d: want the edge at most it and within 1/16 of it", rtt, i, e)
		}
		if binIndex(rtt+1) < i || binEdge(i+1) <= rtt && binIndex(binEdge(i+1)) == i+1 {
			t.Errorf("RTT %d in bin %d: the bins are not in order (bin %d starts at %d)", rtt, i, i+1, binEdge(i+1))
		}
	}
	b := newBaseline(int64(30 * time.Second))
	for range baselineRounds {
		b.observe(int64(time.Second), int64(20*ms))
	}
	b.anchor.epoch = -1 // the first round's anchor aside
	if got := b.at(0); got != int64(20*ms) {
		t.Errorf("rounds of 20 ms: the bucket reads %v, want exactly 20 ms", time.Duration(got))
	}
	// 100000 rounds in one bucket, one in twenty at 10 ms, the rest at
	// 20 ms: past a 16-bit bin's count, none lost; the 10th percentile
	// is in the 20 ms bin, read as its lower edge (the bucket's smallest,
	// 10 ms, is in another).
	b = newBaseline(int64(30 * time.Second))
	for i := range 100_000 {
		rtt := 20 * ms
		if i%20 == 0 {
			rtt = 10 * ms
		}
		b.observe(int64(time.Second), int64(rtt))
	}
	b.anchor.epoch = -1
	s := &b.buckets[0]
	want := binEdge(binIndex(int64(20 * ms)))
	if got := b.at(0); got != want || s.rounds != 100_000 {
		t.Errorf("100000 rounds, a twentieth at 10 ms: the bucket reads %v with %d rounds kept, want %v and all 100000 kept",
			time.Duration(got), s.rounds, time.Duration(want))
	}
}
