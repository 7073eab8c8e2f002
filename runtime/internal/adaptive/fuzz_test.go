package adaptive

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
)

// model is the obviously correct limiter: the rules of the package doc
// written out with slices and no concurrency. It keeps every success of
// the current round and every round's RTT with the time it ended.
type model struct {
	p        Policy
	value    float64
	inFlight int
	round    uint64
	halvedIn uint64
	sampled  int64 // when the current round's last success was counted
	samples  []int64
	loads    int64 // Σ of the samples' calls in flight at their acquire
	peak     int
	rounds   []modelRound
	// anchor is the round a restart, or a round in an empty window, set
	// the baseline from.
	anchor struct {
		at, rtt int64
		set     bool
	}
	least int64 // the baseline of the last round, 0 before one
	// ref is the reference round of a run of slow rounds (load 0: none).
	ref struct {
		load, gradient, gload float64
		once                  bool
	}
}

type modelToken struct {
	round uint64
	load  int
}

func (m *model) acquire() (modelToken, bool) {
	if m.inFlight >= int(m.value) {
		return modelToken{}, false
	}
	m.inFlight++
	return modelToken{m.round, m.inFlight}, true
}

// modelRound is a round the model keeps for the baseline: when it ended,
// its RTT, and, for the first round of its bucket, the bins' origin the
// bucket was given (binIndex of the baseline it began under, less half
// the bins).
type modelRound struct {
	at, rtt int64
	origin  int
}

func (m *model) setLimit(v float64) {
	m.value = math.Min(math.Max(v, float64(m.p.MinLimit)), float64(m.p.MaxLimit))
	m.samples, m.peak, m.loads = nil, 0, 0
	m.round++
}

// baseline is the baseline the rounds kept give at now, written out from
// the package doc: the smallest of the anchor and of each bucket's 10th
// percentile (the ⌈n/10⌉-th smallest of its n rounds), the current
// bucket's once it holds baselineRounds, read at the resolution of its histogram (binIndex,
// binEdge: bins centred on the baseline the bucket began under, roundAt); without any, the
// smallest round of the window.
func (m *model) baseline(now int64) int64 {
	width := max(int64(m.p.BaselineWindow)/baselineBuckets, 1)
	cur := now / width
	live := func(at int64) bool { q := at / width; return q <= cur && cur-q < baselineBuckets }
	least, counted := int64(math.MaxInt64), false
	buckets := map[int64][]int64{} // each live bucket's rounds, in order
	origins := map[int64]int{}     // and its bins' origin
	for _, r := range m.rounds {
		if live(r.at) {
			if _, ok := buckets[r.at/width]; !ok {
				origins[r.at/width] = r.origin
			}
			buckets[r.at/width] = append(buckets[r.at/width], r.rtt)
		}
	}
	reading := func(rtts []int64, origin int) int64 { // a bucket's
		bin := func(rtt int64) int { return min(max(binIndex(rtt)-origin, 0), baselineBins-1) }
		sorted := slices.Sorted(slices.Values(rtts))
		v, low := sorted[bucketRank(len(sorted))-1], sorted[0]
		if bin(v) != bin(low) {
			low = max(low, binEdge(origin+bin(v)))
		}
		return low
	}
	if m.anchor.set && m.anchor.at <= now && len(buckets) > 0 {
		// The anchor counts while the window holds rounds: its first round
		// while its bucket is in the window, then that bucket's reading.
		if live(m.anchor.at) {
			least, counted = m.anchor.rtt, true
		} else {
			var rtts []int64
			origin := 0
			for _, r := range m.rounds {
				if r.at/width == m.anchor.at/width {
					if rtts == nil {
						origin = r.origin
					}
					rtts = append(rtts, r.rtt)
				}
			}
			least, counted = reading(rtts, origin), true
		}
	}
	for k, rtts := range buckets {
		if k == cur && len(rtts) < baselineRounds {
			continue // the current bucket counts once it holds baselineRounds
		}
		least, counted = min(least, reading(rtts, origins[k])), true
	}
	if !counted {
		for _, r := range m.rounds {
			if live(r.at) {
				least = min(least, r.rtt)
			}
		}
	}
	return least
}

// roundAt is the round of RTT rtt ending at now, to be kept: the first of
// its bucket gets the origin of bins centred on the baseline the bucket
// begins under (without one, on rtt).
func (m *model) roundAt(now, rtt int64) modelRound {
	width := max(int64(m.p.BaselineWindow)/baselineBuckets, 1)
	for _, r := range m.rounds {
		if r.at/width == now/width {
			return modelRound{at: now, rtt: rtt} // not the first
		}
	}
	ref := m.baseline(now)
	if ref == math.MaxInt64 {
		ref = rtt
	}
	return modelRound{at: now, rtt: rtt, origin: binIndex(ref) - baselineBins/2}
}

// windowEmpty reports whether the window at now holds no round (whose
// RTTs are at most an hour); the anchor counts only with one.
func (m *model) windowEmpty(now int64) bool { return m.baseline(now) == math.MaxInt64 }

func (m *model) release(t modelToken, o Outcome, rtt time.Duration, now int64) {
	inFlight := m.inFlight
	m.inFlight--
	if o == Ignored || rtt <= 0 && o == Success {
		return
	}
	if o == Dropped {
		m.ref.load = 0
		if t.round >= m.halvedIn {
			m.setLimit(math.Max(m.value/2, float64(m.p.MinLimit)))
			m.halvedIn = m.round
		}
		return
	}
	if len(m.samples) > 0 && now-m.sampled > int64(m.p.BaselineWindow) {
		// Successes before a spell of none longer than the window are
		// dropped from the round.
		m.samples, m.peak, m.loads = nil, 0, 0
	}
	m.sampled = now
	m.samples = append(m.samples, min(int64(rtt), int64(time.Hour)))
	m.peak = max(m.peak, inFlight)
	m.loads += int64(t.load)
	if t.round != m.round {
		return
	}
	// The round's RTT: the median of its first roundSamples successes (the
	// mean of the two middle ones of an even count, rounded down).
	first := slices.Clone(m.samples[:min(len(m.samples), roundSamples)])
	slices.Sort(first)
	lo, hi := first[(len(first)-1)/2], first[len(first)/2]
	median := (lo + hi) / 2 // at most two hours: no overflow
	if m.windowEmpty(now) {
		m.anchor.at, m.anchor.rtt, m.anchor.set = now, median, true
	}
	m.rounds = append(m.rounds, m.roundAt(now, median))
	// "Times slower than the baseline" is the ratio, as the package doc
	// says: a round of exactly Tolerance times the baseline is not too
	// slow. (Written as median > Tolerance×baseline, the product rounds:
	// the fuzzer found 1050 ms over a 375 ms baseline at a Tolerance of 2.8
	// judged too slow.)
	// The gradient is the round's weight times its median over the
	// baseline, over its weight (the limiter sums that over its classes:
	// the same arithmetic for one). A baseline that moved since the last
	// round rescales the reference gradient of a slow run to the new one.
	b := m.baseline(now)
	if m.least == 0 {
		m.least = b
	}
	n := float64(len(m.samples))
	now1 := n * float64(median) / float64(max(b, 1))
	then := n * float64(median) / float64(max(m.least, 1))
	m.least = b
	slower := now1 / n
	if m.ref.load != 0 && then != now1 {
		m.ref.gradient *= now1 / then
	}
	// Not queueing: two slow rounds in a row admitted at no more than
	// three quarters of their run's first load (or at the lowest limit),
	// neither 15 % faster than the run's latest round above that, restart
	// the baseline from the second; a faster one starts the comparison
	// again from itself.
	load := float64(m.loads) / float64(len(m.samples))
	switch {
	case slower <= m.p.Tolerance:
		m.ref.load = 0
	case m.ref.load == 0:
		m.ref.load, m.ref.gradient, m.ref.gload, m.ref.once = load, slower, load, false
	case 4*load > 3*m.ref.load && m.value > float64(m.p.MinLimit):
		m.ref.gradient, m.ref.gload, m.ref.once = slower, load, false
	case 4*load > 3*m.ref.gload && m.value > float64(m.p.MinLimit):
		m.ref.once = false
	case 20*slower < 17*m.ref.gradient:
		m.ref.load, m.ref.gradient, m.ref.gload, m.ref.once = load, slower, load, false
	case !m.ref.once:
		m.ref.once = true
	default:
		m.ref.load = 0
		m.rounds = m.rounds[:0]
		m.anchor.at, m.anchor.rtt, m.anchor.set = now, median, true
		m.rounds = append(m.rounds, m.roundAt(now, median)) // its bucket begins under the anchor
		slower = 1
	}
	target := m.value
	switch {
	case slower > m.p.Tolerance:
		target = m.value * math.Max(0.5, m.p.Tolerance/slower)
	case 2*float64(m.peak) >= math.Floor(m.value):
		target = m.value + math.Sqrt(m.value)
	}
	m.setLimit(m.value + m.p.Smoothing*(target-m.value))
}

// FuzzLimiter checks Limiter against model on any sequence of acquires,
// releases of any held token with any outcome and RTT, and steps of the
// clock.
func FuzzLimiter(f *testing.F) {
	f.Add([]byte{0, 4, 2, 2, 0, 0, 0, 0, 1, 0, 0, 40, 1, 0, 0, 40, 2, 10, 0, 1, 0, 1, 90, 1, 0, 2, 0})
	f.Add([]byte{2, 9, 5, 4, 0, 0, 0, 0, 0, 1, 0, 1, 30, 1, 0, 1, 30, 0, 0, 1, 1, 1, 200, 2, 255, 0, 1, 0, 0, 5})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 10, 1, 2, 0, 20, 1, 0, 0, 250, 2, 100, 2, 100, 0, 1, 0, 0, 30})
	// Rounds of one call each, 10 ms apart, for 3 s in a window of 2 s
	// (buckets of 200 ms hold 20 rounds, and their percentiles count once
	// the first round, the anchor, is forgotten): RTTs of 100 to 290 ms,
	// 20 apart in each bucket (its 10th percentile is its second
	// smallest), one round in seven at 400 ms, beyond the tolerance of 2.8
	// of some, so that the baseline sets how far the limit shrinks.
	spread := []byte{0, 9, 4, 19, 9, 9}
	for i := range 300 {
		rtt := byte(20 + i*7%20*2)
		if i%7 == 6 {
			rtt = 80
		}
		spread = append(spread, 0, 1, 0, 0, rtt, 0, 2, 1)
	}
	f.Add(spread)
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		p := Policy{
			MinLimit:       int(prog.Next()%3) + 1,
			Tolerance:      1 + float64(prog.Next()%10)/5,
			Smoothing:      float64(prog.Next()%10+1) / 10,
			BaselineWindow: time.Duration(prog.Next()%20+1) * 100 * time.Millisecond,
		}
		p.MaxLimit = p.MinLimit + int(prog.Next()%30)
		p.InitialLimit = p.MinLimit + int(prog.Next())%(p.MaxLimit-p.MinLimit+1)
		l := mustNew(t, p)
		m := &model{p: l.Policy(), value: float64(p.InitialLimit)}
		type held struct {
			t  Token
			mt modelToken
		}
		var tokens []held
		var now int64
		for step := 0; !prog.Done() && step < 2048; step++ {
			switch prog.Next() % 3 {
			case 0:
				tok, ok := l.Acquire()
				mt, wantOK := m.acquire()
				if ok != wantOK {
					t.Fatalf("step %d: Acquire = %v with %d in flight at limit %v, model says %v", step, ok, l.InFlight(), l.value, wantOK)
				}
				if ok {
					tokens = append(tokens, held{tok, mt})
				}
			case 1:
				if len(tokens) == 0 {
					continue
				}
				i := int(prog.Next()) % len(tokens)
				o := Outcome(prog.Next() % 3)
				rtt := time.Duration(prog.Next()) * 5 * time.Millisecond
				if prog.Next() == 255 {
					rtt = math.MaxInt64 // capped at an hour
				}
				h := tokens[i]
				tokens = append(tokens[:i], tokens[i+1:]...)
				l.Release(h.t, o, rtt, base.Add(time.Duration(now)))
				m.release(h.mt, o, rtt, now)
			case 2:
				now += int64(prog.Next()) * int64(10*time.Millisecond)
			}
			// The limiter judges a round answer by answer against each
			// method's baseline, the model by the round's median: the same
			// value but for the last bits of the float (1 ulp, found by
			// the fuzzer). Within 1e-9 of it, the model takes the
			// limiter's value, so that no rounding accumulates.
			if math.Abs(l.value-m.value) > 1e-9*math.Max(1, m.value) || l.Limit() != int(l.value) || l.InFlight() != m.inFlight {
				t.Fatalf("step %d: limit %v (%d), in flight %d; model says %v, %d", step, l.value, l.Limit(), l.InFlight(), m.value, m.inFlight)
			}
			m.value = l.value
		}
	})
}
