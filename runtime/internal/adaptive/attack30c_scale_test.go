package adaptive

import (
	"math"
	"testing"
	"time"
)

// atk30cLogNormal plays 16 callers against a dependency that never queues,
// each call log-normal of the given median and σ 0.5 (seed 12345), from
// 0 to 160 s, under p; it returns the sim counted over 40–160 s.
func atk30cLogNormal(t *testing.T, p Policy, median time.Duration) *atk29cSim {
	srv := atk29cNewServer(1000, 0)
	u := atk29cRand(12345)
	srv.service = func(time.Duration) time.Duration {
		z := math.Sqrt2 * math.Erfinv(2*u()-1)
		return time.Duration(float64(median) * math.Exp(0.5*z))
	}
	s := atk29cNewSim(t, p, 16, srv)
	s.run(40*time.Second, nil)
	s.resetCounts()
	s.run(160*time.Second, nil)
	return s
}

// TestAttack30cLogNormalLatencyWithoutQueueingAtAnotherScale:
// TestAttack29cLogNormalLatencyWithoutQueueing's dependency (log-normal,
// σ 0.5, never queueing, 16 callers, at most 16) with a median of 100 ms
// instead of 20 ms, counted over 40–160 s. The limit, the baseline window
// and the tolerance are the same; only the 3 s buckets and their 16
// rounds do not scale with the latency. 20 ms (the same function, not
// run here, as it is slow under -race): the limit 14.8 of 16 and 92 % of a
// static bulkhead's answers, 10 of 10 buckets counted at 160 s (the
// README's 14.9 and 93 %). 100 ms: 8.3 of 16 and 68 %, 4 of 10 buckets
// counted and a restart's anchor live at 160 s, the baseline 65 ms. The
// figures move with the horizon (over 40–100 s: 10.7 and 80 %, 9 of 10
// buckets counted at 100 s), so the cause is not pinned down here; not
// compared with the code before the percentile. README, Limits: "With the
// buckets' 10th percentile it is 14.9 of 16 and 93 %", no scale given.
func TestAttack30cLogNormalLatencyWithoutQueueingAtAnotherScale(t *testing.T) {
	check := func(t *testing.T, median time.Duration) {
		static := atk30cLogNormal(t, Policy{MinLimit: 16, MaxLimit: 16}, median)
		s := atk30cLogNormal(t, Policy{MaxLimit: 16, InitialLimit: 16}, median)
		share := float64(s.answers()) / float64(static.answers())
		b := &s.l.classes[0].baseline
		counted := 0
		for i := range b.buckets {
			if v := &b.buckets[i]; live(v.epoch, int64(160*time.Second)/b.width) && v.rounds >= baselineRounds {
				counted++
			}
		}
		t.Logf("log-normal %v σ 0.5: limit mean %.1f of 16, %d answers against a static bulkhead's %d (%.0f %%); baseline %v at 160 s, %d of its 10 buckets counted, anchor live %v",
			median, s.meanLimit(), s.answers(), static.answers(), 100*share, s.l.atk29aBaseline(160*time.Second), counted, live(b.anchor.epoch, int64(160*time.Second)/b.width))
		if s.meanLimit() < 12 || share < 0.8 {
			t.Errorf("a dependency of median %v that never queues: the limit averaged %.1f of 16 and the client had %.0f %% of a static bulkhead's answers, "+
				"want at least 12 and 80 %% (the README's 14.9 and 93 %% at 20 ms)", median, s.meanLimit(), 100*share)
		}
	}
	broken(t, "log-normal latency of median 100 ms, σ 0.5, never queueing: over 40–160 s the limit averages 11.2 of 16 and the client has 80 % of a static bulkhead's answers "+
		"(20 ms: 14.8 and 92 %); the baseline 67 ms at 160 s; before past buckets of fewer than 16 rounds counted with their median, 8.3 and 68 %")
	check(t, 100*ms)
}
