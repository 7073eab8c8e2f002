package adaptive

import (
	"container/heap"
	"fmt"
	"math"
	"testing"
	"time"
)

// Attack 30d: periodic bursts, each a queue that drains in the idle spell
// after it. README "Adaptive concurrency limit": "A queue that builds
// within the window leaves the baseline where it was, since the anchor and
// every bucket from before the queue stay in the window for 30 s"; "A queue
// is still a queue: ... the limit falls to about the new capacity ×
// tolerance"; Limits: "A queue that never drains outlives the window".

// atk30dBursts plays 60 callers in a loop for the first 5 s of every
// period from 1 s on (a batch job; idle between), six bursts, against the
// cascade's dependency of 8 workers (40 ms unloaded, 40 ms × in flight / 8
// beyond: a queue and nothing else, drained in each idle spell), no
// timeout. It returns, per burst, the baseline as it begins and the mean
// latency of the calls it admitted, and the limit as the last begins.
func atk30dBursts(t *testing.T, period time.Duration) (baselines, latencies []time.Duration, last int) {
	const k, on, bursts = 8, 5 * time.Second, 6
	c := newCascade(t, 0)
	c.timeout = time.Hour
	c.latency = func(at time.Duration, inFlight int) time.Duration {
		return 40 * ms * time.Duration(max(inFlight, k)) / time.Duration(k)
	}
	start := func(b int) time.Duration { return time.Second + time.Duration(b)*period }
	for i := range 60 {
		heap.Push(&c.q, event{at: start(0) + time.Duration(i)*time.Millisecond, caller: i})
	}
	cur := -1
	var sum time.Duration
	var n int
	for c.q.Len() > 0 && c.q[0].at < start(bursts) {
		e := heap.Pop(&c.q).(event)
		b := int((e.at - time.Second) / period)
		if !e.done && e.at-start(b) >= on {
			// Idle until the next burst.
			heap.Push(&c.q, event{at: start(b+1) + time.Duration(e.caller)*time.Millisecond, caller: e.caller})
			continue
		}
		if !e.done && b != cur {
			if cur >= 0 {
				latencies = append(latencies, sum/time.Duration(max(n, 1)))
			}
			cur, sum, n = b, 0, 0
			baselines = append(baselines, c.l.atk29aBaseline(e.at))
			last = c.l.Limit()
		}
		if e.done {
			c.l.Release(e.tok, e.o, e.rtt, base.Add(e.at))
			heap.Push(&c.q, event{at: e.at, caller: e.caller})
		} else if tok, ok := c.l.Acquire(); !ok {
			heap.Push(&c.q, event{at: e.at + refusalPause, caller: e.caller})
		} else {
			lat := c.latency(e.at, c.l.InFlight())
			heap.Push(&c.q, event{at: e.at + lat, caller: e.caller, tok: tok, done: true, o: Success, rtt: lat})
			sum += lat
			n++
		}
	}
	latencies = append(latencies, sum/time.Duration(max(n, 1)))
	return baselines[1:], latencies, last
}

func atk30dRound(ds []time.Duration) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += " → "
		}
		s += fmt.Sprint(d.Round(time.Millisecond))
	}
	return s
}

// TestAttack30dPeriodicBurstsRatchetTheBaseline: 60 callers for 5 s of
// every period against 8 workers: each burst is a queue from its first
// round (60 calls for 8 workers), which drains in the idle spell after
// it. The first burst is what a queue should be: its first round (40 ms,
// unloaded) is the anchor, the limit comes down from 20 to about 12, the
// calls 68 ms on average. The bursts after it are not, in two ways.
//
// Every 60 s the window is empty as each burst begins, but the round in
// progress is not: it began as the last calls of the burst before came
// back, and it holds their queued RTTs (calls admitted in an earlier round
// add their answers to it without ending it), until the first answer of
// the next burst, admitted in it, ends it 55 s later: its median is the
// previous burst's queue, 75 ms after the first burst, and it is the
// anchor of the empty window. Each burst begins under the queue of the one
// before: the anchor 75 → 115 → 170 → 280 → 300 ms at the 2nd to the 6th
// burst, the calls 68 → 114 → 175 → 252 → 290 → 291 ms, the limit at its
// maximum 100 from the 5th (60 callers for 8 workers unlimited: 300 ms).
//
// Every 20 s, 28 s or 31 s the window still holds the last burst's
// buckets, all queued, when the next begins: its first round is no anchor
// (the window is not empty), and the baseline is the queue of the one
// before. Every 31 s: 55 → 122 → 185 → 300 → 300 ms as the 2nd to the 6th
// begin, the limit 100 from the 5th, the calls 291 ms; every 28 s, 40 →
// 80 → 113 → 159 → 285 ms, the limit 100; every 20 s, 40 → 55 → 80 → 88
// → 122 ms, the limit 26, the calls 185 ms in the 6th. None of these
// queues filled the window, and each drained.
//
// Fixed since, both: successes counted before a spell of none longer than
// the baseline window are dropped from the round (the 60 s case: the next
// burst's own first round is the anchor), and the anchor counts while the
// window holds rounds. Every 60 s each burst is then the first one's
// (calls 65–68 ms, the limit about 13). Every 20–31 s the first burst's
// anchor holds while its bucket is in the window, and after it the
// bucket's reading, 55 ms (the anchor's bucket held the first burst's
// queue building: a raw first round kept for good would let a lucky one
// hold the limit down for good, TestAttack30eLuckyAnchorOutlivesTheWindow):
// calls 84–88 ms, twice the unloaded 40, the limit 17–19, and no
// ratchet: the baseline stays 55 ms burst after burst.
func TestAttack30dPeriodicBurstsRatchetTheBaseline(t *testing.T) {
	check := func(t *testing.T, period time.Duration) {
		baselines, latencies, last := atk30dBursts(t, period)
		t.Logf("bursts of 5 s every %v: baseline as bursts 2–6 begin %s (2562047h…: an empty window); calls' mean latency per burst %s; limit %d as the last begins",
			period, atk30dRound(baselines), atk30dRound(latencies), last)
		for i, b := range baselines {
			n := len(baselines)
			if b != math.MaxInt64 && (b > 60*ms || i >= n-3 && b != baselines[n-3]) || latencies[i+1] > 100*ms || last > 24 {
				t.Fatalf("bursts of a queue every %v, drained between: burst %d begins under a baseline of %v and its calls take %v on average "+
					"(baselines %s, latencies %s, limit %d as the 6th begins); want no ratchet (within tolerance × the unloaded 40 ms, "+
					"the same at the last three bursts), calls within 2.5 times it and the limit within twice 8 × tolerance (12)",
					period, i+2, b, latencies[i+1], atk30dRound(baselines), atk30dRound(latencies), last)
			}
		}
	}
	t.Run("every 60 s", func(t *testing.T) {
		check(t, 60*time.Second)
	})
	for _, period := range []time.Duration{20 * time.Second, 28 * time.Second, 31 * time.Second} {
		t.Run("every "+period.String(), func(t *testing.T) {
			check(t, period)
		})
	}
}
