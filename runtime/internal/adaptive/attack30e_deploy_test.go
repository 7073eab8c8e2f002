package adaptive

import (
	"math"
	"testing"
	"time"
)

// TestAttack30eDeployWhileTheAnchorHolds: 150 callers under the default
// policy, never a pause, against a dependency that never queues (1000
// workers, log-normal σ 0.2, seed 1) and is replaced at 40 s (a deploy:
// median 20 → 60 ms). Since the anchor counts while the window holds
// rounds, the first round's 14.8 ms is still the baseline at 40 s (before
// change 1 the buckets' 17.8 ms), and only the not-queueing rule can
// raise it: it does, the baseline 54.5 ms at 90 s and the limit 100 of
// 100 over 45–90 s, as many answers as a static bulkhead of 100 (the
// same before change 1). README: a latency that moved without a queue
// "is taken as the new latency within a few rounds".
func TestAttack30eDeployWhileTheAnchorHolds(t *testing.T) {
	var sims [2]*atk29cSim
	var at40 time.Duration
	for k, p := range []Policy{{MinLimit: 100, MaxLimit: 100}, {}} {
		srv := atk29cNewServer(1000, 0)
		u := atk29cRand(1)
		srv.service = func(at time.Duration) time.Duration {
			m := 20 * ms
			if at >= 40*time.Second {
				m = 60 * ms
			}
			z := math.Sqrt2 * math.Erfinv(2*u()-1)
			return time.Duration(float64(m) * math.Exp(0.2*z))
		}
		sims[k] = atk29cNewSim(t, p, 150, srv)
		sims[k].run(40*time.Second, nil)
		at40 = sims[k].l.atk29aBaseline(40 * time.Second)
		sims[k].run(45*time.Second, nil)
		sims[k].resetCounts()
		sims[k].run(90*time.Second, nil)
	}
	static, s := sims[0], sims[1]
	share := float64(s.answers()) / float64(static.answers())
	b := s.l.atk29aBaseline(90 * time.Second)
	t.Logf("baseline %v at 40 s, %v at 90 s; over 45–90 s limit mean %.1f of 100, %d answers against a static bulkhead's %d (%.1f %%)",
		at40, b, s.meanLimit(), s.answers(), static.answers(), 100*share)
	if b < 40*ms || s.meanLimit() < 90 || share < 0.95 {
		t.Errorf("a deploy 20 → 60 ms without a queue at 40 s: the baseline %v at 90 s, the limit %.1f of 100 and %.1f %% of a static bulkhead's answers over 45–90 s; "+
			"want the new latency taken (a baseline above 40 ms, at least 90 and 95 %%)", b, s.meanLimit(), 100*share)
	}
}
