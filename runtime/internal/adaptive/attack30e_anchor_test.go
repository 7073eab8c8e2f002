package adaptive

import (
	"math"
	"testing"
	"time"
)

// atk30eLogNormal is a dependency that never queues (1000 workers), each
// call log-normal of median 20 ms and σ 0.2 (seed 7), but for the first
// call served, which takes first (a cache-warm answer).
func atk30eLogNormal(first time.Duration) *atk29cServer {
	srv := atk29cNewServer(1000, 0)
	u := atk29cRand(7)
	n := 0
	srv.service = func(time.Duration) time.Duration {
		if n++; n == 1 {
			return first
		}
		z := math.Sqrt2 * math.Erfinv(2*u()-1)
		return time.Duration(float64(20*ms) * math.Exp(0.2*z))
	}
	return srv
}

// TestAttack30eLuckyAnchorOutlivesTheWindow: 100 callers, a dependency
// that never queues (log-normal, median 20 ms, σ 0.2: a narrower spread
// than the README's σ 0.5), whose first answer is a cache-warm 12.9 ms;
// the default policy but an initial limit of 100, against a static
// bulkhead of 100, counted over 30–90 s. The first round ends with that
// answer and is the window's anchor, 1.55 times below the ordinary
// rounds (20 ms). Rounds straddle tolerance × anchor (19.35 ms): those
// above shrink the limit a little, those within it end the run before
// the not-queueing rule sees two rounds at three quarters of the
// reference's load, so no restart ever replaces the anchor. Since the
// anchor counts for as long as the window holds rounds (change 1) it is
// the baseline at 90 s, set at 0 s, and the limit averages 40.7 of 100
// over 30–90 s, the client 41 % of the static bulkhead's answers.
// Before change 1 the same depression lasted only while the anchor was in
// the window (a limit of 35.1 over 0–30 s), then the buckets' 10th
// percentile (17.8 ms) took over: 99.9 of 100 and 99.8 % over 30–90 s.
// README: "a tail that a minority of calls meet ... does not move it"
// (93–97 %), σ 0.5 "14.9 of 16 and 93 %"; the baseline is "the
// dependency's latency without queueing". Fixed since: the anchor's first
// round counts while its bucket is in the window, the bucket's reading
// after it (17.8 ms here: 99.9 of 100 and 99.8 % over 30–90 s).
func TestAttack30eLuckyAnchorOutlivesTheWindow(t *testing.T) {
	var sims [2]*atk29cSim
	for k, p := range []Policy{{MinLimit: 100, MaxLimit: 100}, {InitialLimit: 100}} {
		sims[k] = atk29cNewSim(t, p, 100, atk30eLogNormal(12900*time.Microsecond))
		sims[k].run(30*time.Second, nil)
		sims[k].resetCounts()
		sims[k].run(90*time.Second, nil)
	}
	static, s := sims[0], sims[1]
	share := float64(s.answers()) / float64(static.answers())
	b := &s.l.classes[0].baseline
	t.Logf("over 30–90 s: limit mean %.1f of 100, %d answers against a static bulkhead's %d (%.1f %%); baseline %v at 90 s, anchor %v set in bucket %d",
		s.meanLimit(), s.answers(), static.answers(), 100*share, s.l.atk29aBaseline(90*time.Second), time.Duration(b.anchor.rtt), b.anchor.epoch)
	if s.meanLimit() < 90 || share < 0.9 {
		t.Errorf("a dependency that never queues: the limit averaged %.1f of 100 over 30–90 s and the client had %.1f %% of a static bulkhead's answers, "+
			"the baseline %v at 90 s (the first answer's, 0 s); want at least 90 and 90 %% (the README's minority tail: 93–97 %%)",
			s.meanLimit(), 100*share, s.l.atk29aBaseline(90*time.Second))
	}
}
