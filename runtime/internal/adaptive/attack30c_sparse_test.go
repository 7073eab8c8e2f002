package adaptive

import (
	"container/heap"
	"math"
	"testing"
	"time"
)

// Attack 30c: the baseline of buckets' 10th percentiles (baseline.go)
// against queues. README "Adaptive concurrency limit": "The baseline is the
// smallest of the anchor, the round the window began with ..., and of the
// 10th percentile of the round RTTs of each of the window's ten buckets
// (3 s each) that holds 16 rounds or more; without either, the smallest
// round of the window"; "A queue that builds within the window leaves the
// baseline where it was, since the anchor and every bucket from before the
// queue stay in the window for 30 s."

// atk30cSparseThenBurst plays a client that calls the cascade's dependency
// of 8 workers (40 ms unloaded, 40 ms × in flight / 8 beyond: a queue and
// nothing else) once every gap, one call at a time, from 0 to 36 s (a bucket's start), then
// 60 callers in a loop from 36 s to 60 s, no timeout. It returns the
// baseline at 36 s, the highest it held over 36–60 s and when it first
// rose above 40 ms (-1 for never), and the limit's mean over 45–60 s.
func atk30cSparseThenBurst(t *testing.T, gap time.Duration) (at35, highest, rose time.Duration, mean float64) {
	const k, burst = 8, 36 * time.Second
	c := newCascade(t, 0)
	c.timeout = time.Hour
	c.latency = func(at time.Duration, inFlight int) time.Duration {
		return 40 * ms * time.Duration(max(inFlight, k)) / time.Duration(k)
	}
	for now := gap; now < burst; now += gap {
		// One call, alone: a round of 40 ms (unloaded), its own.
		atk29cRound(t, c.l, 1, 40*ms, now)
	}
	at35 = c.l.atk29aBaseline(burst)
	for i := range 60 {
		heap.Push(&c.q, event{at: burst + time.Duration(i)*time.Millisecond, caller: i})
	}
	rose = -1
	var sum, n int
	c.run(60*time.Second, func(at time.Duration) {
		b := c.l.atk29aBaseline(at)
		if b != math.MaxInt64 {
			highest = max(highest, b)
			if rose < 0 && b > 40*ms {
				rose = at - burst
			}
		}
		if at > 45*time.Second {
			sum += c.l.Limit()
			n++
		}
	})
	return at35, highest, rose, float64(sum) / float64(max(n, 1))
}

// TestAttack30cQueueAfterSparseTrafficIsStillAQueue: a client whose calls
// were sparse (one at a time, every 250 ms: 12 rounds a bucket, fewer than
// the 16 a bucket needs for its percentile to count) for 36 s, longer than
// the window, so that the anchor (its first round, at 0.25 s) has left it;
// then 60 callers, and the dependency (8 workers) queues. The baseline at
// 36 s is 40 ms, the unloaded latency (the smallest round: no bucket
// counts). The buckets from before the queue hold only unqueued rounds and
// stay in the window until 30 s after they began, but they count for
// nothing once a bucket of queued rounds holds 16: the baseline jumps to
// the queued bucket's 10th percentile, 54.5 ms, 1.13 s into the queue,
// and the limit holds the queue at tolerance × that: 17.6 on average over
// 45–60 s. With calls every 150 ms (20 rounds a bucket) the old buckets
// count, the baseline stays at 40 ms and the limit averages 13.1 (8 ×
// tolerance = 12). The smallest round of the window, the baseline before
// the percentile, would have stayed 40 ms here (rounds of 40 ms are in it
// until 66 s). Fixed since: a bucket of the past counts whatever it holds,
// with its median below 16 rounds (bucketRank): the baseline stays 40 ms
// and the limit averages 13.1 in both cases. README: "A queue that builds within the window leaves
// the baseline where it was, since the anchor and every bucket from
// before the queue stay in the window for 30 s"; "A queue is still a
// queue".
func TestAttack30cQueueAfterSparseTrafficIsStillAQueue(t *testing.T) {
	t.Run("dense before: 20 rounds a bucket", func(t *testing.T) {
		at35, highest, rose, mean := atk30cSparseThenBurst(t, 150*ms)
		t.Logf("a call every 150 ms, then 60 callers at 36 s: baseline %v at 36 s, at most %v over 36–60 s (rose after %v, -1: never); limit mean %.1f over 45–60 s (8 × tolerance = 12)",
			at35, highest, rose, mean)
		if at35 != 40*ms || rose >= 0 || mean > 16 {
			t.Errorf("baseline %v at 36 s, rose %v after the queue began to at most %v, limit mean %.1f: want 40 ms throughout and the limit about 12",
				at35, rose, highest, mean)
		}
	})
	t.Run("sparse before: 12 rounds a bucket", func(t *testing.T) {
		at35, highest, rose, mean := atk30cSparseThenBurst(t, 250*ms)
		t.Logf("a call every 250 ms, then 60 callers at 36 s: baseline %v at 36 s, at most %v over 36–60 s (rose after %v, -1: never); limit mean %.1f over 45–60 s (8 × tolerance = 12)",
			at35, highest, rose, mean)
		if at35 != 40*ms || rose >= 0 || mean > 16 {
			t.Errorf("baseline %v at 36 s, rose %v after the queue began to at most %v, limit mean %.1f: want 40 ms throughout "+
				"(the buckets of 40 ms rounds from before the queue are in the window) and the limit about 12", at35, rose, highest, mean)
		}
	})
}
