package adaptive

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// Attack 29a: the not-queueing rule (README "Adaptive concurrency limit":
// "a queue's wait shortens with the calls ahead in it, a slower dependency
// stays as slow ... a slow round admitted with at most three quarters of
// the reference's calls ... that is not 15 % faster than the reference
// says not queueing"; "(The reference's gradient is its latest round's at
// about its load ...)") against queues that are only queues.

// atk29aBaseline is the baseline class 0 holds at now (math.MaxInt64
// for none).
func (l *Limiter) atk29aBaseline(now time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &l.classes[0].baseline
	return time.Duration(b.at(int64(now) / b.width))
}

// TestAttack29AQueueThatLosesCapacityIsStillAQueue: the cascade's own
// dependency (it serves 25 calls at once in 40 ms and shares its time
// among more: 40 ms × in flight / 25, a queue and nothing else), 60
// callers, no timeout; at 10 s it loses capacity and serves from 8 to 22
// at once. Its unloaded latency is still 40 ms and its latency still
// follows the calls in flight exactly, so the limit should fall from
// about 37 (25 × tolerance) towards the new capacity × tolerance, and the
// not-queueing rule must never restart the baseline. When the reference's
// gradient was the latest round's above three quarters of its load, and
// one round at fewer calls not 15 % faster sufficed, a loss to 18 or 19
// was read as not queueing: a round at load 28 was at 0.88 of the round
// at load 32 it was compared with (their loads differ by an eighth, and
// so does a queue's wait), the baseline restarted from 40 ms to 62 ms,
// and the limit averaged 41 over 15–25 s, calls 90 ms (2.3 × the unloaded
// latency). Two rounds in a row at fewer calls, and the median, hold.
func TestAttack29AQueueThatLosesCapacityIsStillAQueue(t *testing.T) {
	for reduced := 8; reduced <= 22; reduced++ {
		t.Run(fmt.Sprintf("capacity %d", reduced), func(t *testing.T) { atk29aCapacityLoss(t, reduced) })
	}
}

// atk29aCapacityLoss plays the cascade's dependency losing capacity from
// 25 to reduced at 10 s (see the test above).
func atk29aCapacityLoss(t *testing.T, reduced int) {
	const step = 10 * time.Second
	c := newCascade(t, 60)
	c.timeout = time.Hour
	c.latency = func(at time.Duration, inFlight int) time.Duration {
		k := capacity
		if at >= step {
			k = reduced
		}
		return 40 * ms * time.Duration(max(inFlight, k)) / time.Duration(k)
	}
	c.run(step, nil)
	before := c.l.Limit()
	var rose time.Duration = -1
	var raisedTo time.Duration
	var sum, n int
	c.run(25*time.Second, func(at time.Duration) {
		// Before 30 s no baseline round leaves the window: a baseline
		// that rises was restarted by the not-queueing rule.
		if b := c.l.atk29aBaseline(at); rose < 0 && b > 40*ms {
			rose, raisedTo = at-step, b
		}
		if at > 15*time.Second {
			sum += c.l.Limit()
			n++
		}
	})
	mean := float64(sum) / float64(n)
	t.Logf("capacity 25 → %d: limit %d before; baseline raised to %v %v after the step (-1: never); limit mean %.1f over 15–25 s (%d × tolerance = %.1f)",
		reduced, before, raisedTo, rose, mean, reduced, float64(reduced)*1.5)
	if rose >= 0 {
		t.Errorf("a dependency that only queues lost a quarter of its capacity: the not-queueing rule restarted the baseline %v after, from 40 ms to %v "+
			"(its unloaded latency is still 40 ms); README: a queue's wait shortens with the calls ahead in it, and a round that is faster says so", rose, raisedTo)
	}
	if mean >= float64(before) {
		t.Errorf("a dependency that only queues lost a quarter of its capacity: the limit averaged %.1f over 15–25 s, against %d before the loss; "+
			"README: a queue still shrinks it (about %d × tolerance = %.1f here)", mean, before, reduced, float64(reduced)*1.5)
	}
}

// TestAttack29APinnedAndHugeLimitsUnderTheRule: the not-queueing rule at
// the edges of the range (README: "The limit stays in [min_limit,
// max_limit]"; the rule's "(or at min_limit, where fewer cannot be
// tried)"). A dependency that serves one call at a time and queues the
// rest (10 ms × in flight), 8 callers, a 100 ms timeout: with min_limit =
// max_limit = 4, and with max_limit 1, every round is at min_limit, where
// the rule takes a slow round that is not faster for the dependency's own
// latency (seen once in 20 s at 4: the drops end most runs), and the limit
// must not move, nor may one call in five timing out move it. With
// max_limit 2^20 (the largest), 2^20 calls in flight at once, all
// answered alike, the loads the rule sums must not overflow: the limit
// stays a number in range, and a round of them within the tolerance is
// growth, not a shrink.
func TestAttack29APinnedAndHugeLimitsUnderTheRule(t *testing.T) {
	for _, p := range []Policy{{MinLimit: 4, MaxLimit: 4}, {MaxLimit: 1}} {
		c := &cascade{l: mustNew(t, p), timeout: 100 * ms}
		for i := range 8 {
			c.q = append(c.q, event{at: time.Duration(i) * time.Millisecond, caller: i})
		}
		calls := 0
		c.latency = func(_ time.Duration, inFlight int) time.Duration {
			calls++
			if calls%5 == 0 {
				return time.Hour // cut at the 100 ms timeout: a drop
			}
			return 10 * ms * time.Duration(inFlight)
		}
		lo, hi := math.MaxInt, 0
		var restarts int
		last := time.Duration(-1)
		c.run(20*time.Second, func(at time.Duration) {
			lo, hi = min(lo, c.l.Limit()), max(hi, c.l.Limit())
			if b := c.l.atk29aBaseline(at); last >= 0 && b > last {
				restarts++ // the window is 30 s: only the rule raises it
			}
			last = c.l.atk29aBaseline(at)
		})
		t.Logf("policy %+v: %d calls, %d timed out, baseline raised %d times", p, c.reached, c.timedOut, restarts)
		if lo != c.l.Policy().MinLimit || hi != c.l.Policy().MaxLimit || c.maxInFlight > hi {
			t.Errorf("policy %+v: the limit ranged over [%d, %d] with at most %d in flight over %d calls, want it pinned at [%d, %d]",
				p, lo, hi, c.maxInFlight, c.reached, c.l.Policy().MinLimit, c.l.Policy().MaxLimit)
		}
	}

	l := mustNew(t, Policy{MaxLimit: MaxLimit, InitialLimit: MaxLimit})
	toks := make([]Token, MaxLimit)
	for i := range toks {
		var ok bool
		if toks[i], ok = l.Acquire(); !ok {
			t.Fatalf("Acquire %d refused at limit %d", i+1, l.Limit())
		}
	}
	if got := toks[len(toks)-1].load; got != MaxLimit {
		t.Errorf("the last of %d calls in flight carries a load of %d", MaxLimit, got)
	}
	now := base.Add(time.Second)
	// Round 0 ends at its first answer; the rest are answers of round 0
	// coming back in round 1, whose first own answer then ends it.
	for _, tok := range toks {
		l.Release(tok, Success, 10*ms, now)
	}
	tok, _ := l.Acquire()
	l.Release(tok, Success, 10*ms, now)
	if got := l.Limit(); got != MaxLimit {
		t.Errorf("after 2^20 answers in 10 ms at 2^20 in flight (rounds within the tolerance, all of the limit used) the limit is %d, want it still %d", got, MaxLimit)
	}
	if l.InFlight() != 0 {
		t.Errorf("%d in flight after every call was released", l.InFlight())
	}
}
