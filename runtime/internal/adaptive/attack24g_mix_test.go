package adaptive

import (
	"container/heap"
	"testing"
	"time"
)

// mix plays callers that each call one method of a dependency in a loop;
// the dependency does not queue: a method's latency is the same whatever
// is in flight. A refused caller tries again refusalPause later.
type mix struct {
	l        *Limiter
	q        events
	latency  func(caller int, at time.Duration) time.Duration
	outcome  func(caller int, at time.Duration) Outcome
	class    func(caller int, at time.Duration) int
	refused  []int // per caller
	reached  []int
	classOf  []int // per caller: the class of its call in flight
	minLimit int
}

func newMix(t *testing.T, p Policy, callers int) *mix {
	m := &mix{l: mustNew(t, p), refused: make([]int, callers), reached: make([]int, callers), classOf: make([]int, callers)}
	m.outcome = func(int, time.Duration) Outcome { return Success }
	m.class = func(int, time.Duration) int { return 0 }
	for i := range callers {
		heap.Push(&m.q, event{at: time.Duration(i) * 100 * time.Microsecond, caller: i})
	}
	return m
}

func (m *mix) run(end time.Duration) {
	m.minLimit = m.l.Limit()
	for m.q.Len() > 0 && m.q[0].at < end {
		e := heap.Pop(&m.q).(event)
		if e.done {
			m.l.ReleaseAs(e.tok, e.o, m.classOf[e.caller], e.rtt, int64(e.at))
			heap.Push(&m.q, event{at: e.at, caller: e.caller})
			m.minLimit = min(m.minLimit, m.l.Limit())
			continue
		}
		tok, ok := m.l.Acquire()
		if !ok {
			m.refused[e.caller]++
			heap.Push(&m.q, event{at: e.at + refusalPause, caller: e.caller})
			continue
		}
		m.reached[e.caller]++
		lat := m.latency(e.caller, e.at)
		m.classOf[e.caller] = m.class(e.caller, e.at) // what the dependency answers is decided as it is called
		heap.Push(&m.q, event{at: e.at + lat, caller: e.caller, tok: tok, done: true, o: m.outcome(e.caller, e.at), rtt: lat})
	}
}

func (m *mix) counts() (reached, refused int) {
	for i := range m.reached {
		reached += m.reached[i]
		refused += m.refused[i]
	}
	return reached, refused
}

// A dependency with a fast method (1 ms) and a slow one (100 ms) sharing
// the limit, neither queueing: 2 callers of the fast one, 30 of the slow
// one, at most 32 in flight, under the default limit of 20 growing to 100.
// Its latencies do not move, so the limit must not fall; before, a round
// that held only fast answers set the baseline at 1 ms, every round with a
// slow answer was "many times slower", and the limit fell to 1 and stayed
// there, refusing 29580 calls of a healthy dependency for 446 let through.
func TestAttack24gFastAndSlowMethodsSharingTheLimit(t *testing.T) {
	const callers, fast = 32, 2
	m := newMix(t, Policy{}, callers)
	m.latency = func(c int, _ time.Duration) time.Duration {
		if c < fast {
			return time.Millisecond
		}
		return 100 * time.Millisecond
	}
	m.class = func(c int, _ time.Duration) int {
		if c < fast {
			return 0
		}
		return 1
	}
	m.run(10 * time.Second)
	reached, refused := m.counts()
	t.Logf("limit %d (lowest %d), %d calls reached, %d refused", m.l.Limit(), m.minLimit, reached, refused)
	if m.minLimit < 16 {
		t.Errorf("the limit fell to %d with a dependency whose latency never moved, want at least 16 (the initial 20 less a noisy round)", m.minLimit)
	}
	if refused*20 > reached {
		t.Errorf("%d calls refused for %d that reached a healthy dependency, want at most 5 %%", refused, reached)
	}
}

// A dependency answers everything fast with an error that is an answer
// (INTERNAL in 0.1 ms: a bad release), then recovers to its usual 40 ms.
// The fast errors must not become the baseline its answers are judged
// against: before, the limit fell to 1 after the recovery and refused most
// calls for the 30 s the baseline remembers the fast errors.
func TestAttack24gFastErrorAnswersDoNotPoisonTheBaseline(t *testing.T) {
	const callers = 16
	m := newMix(t, Policy{}, callers)
	broken := func(at time.Duration) bool { return at >= 5*time.Second && at < 10*time.Second }
	m.latency = func(_ int, at time.Duration) time.Duration {
		if broken(at) {
			return 100 * time.Microsecond
		}
		return 40 * time.Millisecond
	}
	m.class = func(_ int, at time.Duration) int {
		if broken(at) {
			return 1 // an error answer
		}
		return 0
	}
	m.run(10 * time.Second)
	m.refused, m.reached = make([]int, callers), make([]int, callers)
	m.run(20 * time.Second)
	reached, refused := m.counts()
	t.Logf("after the recovery: limit %d (lowest %d), %d calls reached, %d refused", m.l.Limit(), m.minLimit, reached, refused)
	if m.minLimit < 8 {
		t.Errorf("the limit fell to %d after the recovery to the usual latency, want at least 8", m.minLimit)
	}
	if refused*20 > reached {
		t.Errorf("%d calls refused for %d that reached a recovered dependency, want at most 5 %%", refused, reached)
	}
}
