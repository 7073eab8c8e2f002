package adaptive

import (
	"container/heap"
	"math"
	"testing"
	"time"
)

// The cascade of the course, on a fake clock: callers that call a
// dependency in a loop; the dependency serves 25 calls at once in 40 ms and
// shares its time among more (each takes 40 ms × in flight / 25); then its
// latency steps to 4 s, the calls timing out at 300 ms; then it recovers.

type event struct {
	at     time.Duration // since base
	caller int
	tok    Token
	done   bool // a call coming back; otherwise the caller's next try
	o      Outcome
	rtt    time.Duration
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at < e[j].at || e[i].at == e[j].at && e[i].caller < e[j].caller
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

type cascade struct {
	l       *Limiter
	q       events
	latency func(at time.Duration, inFlight int) time.Duration
	timeout time.Duration
	// per phase
	refused, reached, timedOut int
	maxInFlight                int
}

const (
	refusalPause = 10 * time.Millisecond // a refused caller's next try
	capacity     = 25
)

func newCascade(t *testing.T, callers int) *cascade {
	c := &cascade{l: mustNew(t, Policy{}), timeout: 300 * time.Millisecond}
	for i := range callers {
		heap.Push(&c.q, event{at: time.Duration(i) * time.Millisecond, caller: i})
	}
	return c
}

// run plays the events until the clock reaches end, calling watch after
// each.
func (c *cascade) run(end time.Duration, watch func(at time.Duration)) {
	for c.q.Len() > 0 && c.q[0].at < end {
		e := heap.Pop(&c.q).(event)
		if e.done {
			c.l.Release(e.tok, e.o, e.rtt, base.Add(e.at))
			heap.Push(&c.q, event{at: e.at, caller: e.caller})
		} else if tok, ok := c.l.Acquire(); !ok {
			c.refused++
			heap.Push(&c.q, event{at: e.at + refusalPause, caller: e.caller})
		} else {
			c.reached++
			c.maxInFlight = max(c.maxInFlight, c.l.InFlight())
			lat := c.latency(e.at, c.l.InFlight())
			o := Success
			if lat > c.timeout {
				lat, o = c.timeout, Dropped
				c.timedOut++
			}
			heap.Push(&c.q, event{at: e.at + lat, caller: e.caller, tok: tok, done: true, o: o, rtt: lat})
		}
		if watch != nil {
			watch(e.at)
		}
	}
}

func (c *cascade) resetCounts() { c.refused, c.reached, c.timedOut, c.maxInFlight = 0, 0, 0, 0 }

func TestCascade(t *testing.T) {
	const (
		slowFrom    = 10 * time.Second
		recoverFrom = 20 * time.Second
	)
	c := newCascade(t, 60)
	c.latency = func(at time.Duration, inFlight int) time.Duration {
		if at >= slowFrom && at < recoverFrom {
			return 4 * time.Second
		}
		return 40 * time.Millisecond * time.Duration(max(inFlight, capacity)) / capacity
	}

	// Healthy, 60 callers for a dependency that serves 25 at once without
	// queueing: the limit settles about the capacity × tolerance (37), where
	// the queue adds half the unloaded latency, overshooting by a round's
	// growth.
	const settledLow, settledHigh = capacity, capacity * 3 / 2 * 6 / 5
	low, high := math.MaxInt, 0
	c.run(slowFrom, func(at time.Duration) {
		if at > 5*time.Second {
			low, high = min(low, c.l.Limit()), max(high, c.l.Limit())
		}
	})
	if low < settledLow || high > settledHigh {
		t.Errorf("healthy limit ranged over [%d, %d] in the last 5 s, want within [%d, %d]", low, high, settledLow, settledHigh)
	}
	before := c.l.Limit()
	t.Logf("healthy: limit %d (ranged %d…%d), %d calls, %d refused locally", before, low, high, c.reached, c.refused)

	// Latency steps to 4 s: every call times out at 300 ms. Each timeout
	// round halves the limit, so it is at 1 after ⌈log₂ limit⌉ timeouts
	// (one more for the calls admitted just before the step).
	c.resetCounts()
	var atMin time.Duration = -1
	reachedBefore := 0
	c.run(recoverFrom, func(at time.Duration) {
		if atMin < 0 && c.l.Limit() == 1 {
			atMin = at - slowFrom
			reachedBefore = c.reached
		}
	})
	rounds := int(math.Ceil(math.Log2(float64(before)))) + 1
	if atMin < 0 || atMin > time.Duration(rounds)*c.timeout {
		t.Errorf("limit %d reached 1 after %v of timeouts, want within %d timeouts (%v)", before, atMin, rounds, time.Duration(rounds)*c.timeout)
	}
	// From then on the dependency sees one call per timeout, the rest of the
	// demand refused locally at once.
	if got, want := c.reached-reachedBefore, int((recoverFrom-slowFrom-atMin)/c.timeout)+2; got > want {
		t.Errorf("%d calls reached the dependency at the minimum limit, want at most one per timeout, %d", got, want)
	}
	if c.refused < 100*c.reached {
		t.Errorf("%d refused locally against %d reaching the dependency: the rest must be refused at once", c.refused, c.reached)
	}
	t.Logf("slow: limit %d → 1 in %v; %d calls reached the dependency (%d timed out), %d refused locally",
		before, atMin, c.reached, c.timedOut, c.refused)

	// Recovered: back above 20 within a second (about 14 rounds of 40 ms
	// from 1, and the first of them waits out the last probe's timeout).
	c.resetCounts()
	var back time.Duration = -1
	c.run(recoverFrom+10*time.Second, func(at time.Duration) {
		if back < 0 && c.l.Limit() >= 20 {
			back = at - recoverFrom
		}
	})
	if back < 0 || back > time.Second {
		t.Errorf("limit back to 20 after %v, want within 1 s of the recovery", back)
	}
	if lim := c.l.Limit(); lim < settledLow || lim > settledHigh {
		t.Errorf("limit 10 s after the recovery = %d, want within [%d, %d] again", lim, settledLow, settledHigh)
	}
	t.Logf("recovered: limit back to 20 after %v, %d 10 s later", back, c.l.Limit())
}

// Without the timeout the latency alone brings the limit down when the
// dependency queues, by at most a quarter per round: slower, which is why
// the attempt timeout and the drop it produces matter. Here its latency
// steps from 40 ms to 400 ms × in flight / 2 (it serves two at once, in
// 400 ms, and queues the rest): at 37 in flight a round lasts 7 s. A
// round may last two round trips: when the limit falls, the calls in
// flight were admitted in the round before, and only a call admitted
// after the round began ends it. The baseline window is 5 minutes, so
// that it is the queue, not the window forgetting 40 ms, that the limit
// follows (with 30 s, the baseline forgets 40 ms half-way down, and the
// limit holds where the queue is at the latency it then remembers).
func TestQueueWithoutTimeoutsShrinksByLatency(t *testing.T) {
	c := newCascade(t, 60)
	c.l = mustNew(t, Policy{BaselineWindow: 5 * time.Minute})
	c.timeout = time.Hour
	c.latency = func(at time.Duration, inFlight int) time.Duration {
		if at >= 10*time.Second {
			return 400 * time.Millisecond * time.Duration(max(inFlight, 2)) / 2
		}
		return 40 * time.Millisecond * time.Duration(max(inFlight, capacity)) / capacity
	}
	c.run(10*time.Second, nil)
	before := c.l.Limit()
	c.run(70*time.Second, nil)
	// Once rounds at one and two calls in flight, equally slow, have made
	// 400 ms the baseline (the not-queueing rule at min_limit), the limit
	// settles about 2 × tolerance (3), where the queue adds half the
	// unloaded latency, overshooting by a round's growth: at most 7,
	// against 37 before.
	if got := c.l.Limit(); got > 7 {
		t.Errorf("limit after 60 s of a queue that serves 2 at once = %d, want at most 7 (from %d)", got, before)
	}
	settled := c.l.Limit()
	var high int
	c.run(130*time.Second, func(time.Duration) { high = max(high, c.l.Limit()) })
	t.Logf("a queue that serves 2 at once: limit %d before, %d after 60 s, at most %d in the next 60 s", before, settled, high)
	if high > 7 {
		t.Errorf("the limit rose to %d in the next 60 s of the queue, want at most 7", high)
	}
}

// A dependency whose latency steps from 40 ms to 4 s whatever is in flight
// (it does more per call, without queueing) serves as many calls at once
// as before: the not-queueing rule sees that two rounds in a row admitted
// with a quarter fewer calls are as slow, takes the new latency as the
// baseline, and the limit grows back. Rounds last 4 s here, so the two
// rounds it needs at fewer calls take the limit from 37 to about 15
// first. Without a timeout, nothing else says that 4 s is too slow (with
// one, the drops halve the limit: TestCascade).
func TestSlowWithoutQueueingIsTheNewBaseline(t *testing.T) {
	c := newCascade(t, 60)
	c.timeout = time.Hour
	c.latency = func(at time.Duration, inFlight int) time.Duration {
		if at >= 10*time.Second {
			return 4 * time.Second
		}
		return 40 * time.Millisecond * time.Duration(max(inFlight, capacity)) / capacity
	}
	c.run(10*time.Second, nil)
	before := c.l.Limit()
	low := before
	c.run(40*time.Second, func(time.Duration) { low = min(low, c.l.Limit()) })
	if low < before/3 || low >= before {
		t.Errorf("in the 30 s after the step the limit fell from %d to %d, want below it (a few rounds to tell) and not below a third", before, low)
	}
	c.run(90*time.Second, nil)
	t.Logf("40 ms to 4 s without a queue: limit %d before, as low as %d in 30 s, %d 80 s after the step", before, low, c.l.Limit())
	if got := c.l.Limit(); got < before {
		t.Errorf("limit 80 s after a step without queueing = %d, want back at %d or above", got, before)
	}
}
