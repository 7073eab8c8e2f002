package runtime

import (
	"sync"
	"sync/atomic"
	"time"
)

// State is the state of a circuit breaker.
type State int32

// The states of a circuit breaker. The numbers are those of the
// breaker-state gauge: 0 closed, 1 half-open, 2 open.
const (
	StateClosed   State = 0
	StateHalfOpen State = 1
	StateOpen     State = 2
)

func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return "unknown"
}

// Outcome is what one call told the breaker about the dependency.
type Outcome uint8

// The three outcomes of a call.
const (
	// Success: the dependency answered (an error that is an answer, such as
	// NOT_FOUND, is a success of the dependency).
	Success Outcome = iota
	// Failure: the dependency failed in a way the breaker counts.
	Failure
	// Ignored: the call says nothing about the dependency (the caller
	// cancelled it). A half-open probe that ends this way frees its place.
	Ignored
)

// Ticket is what Breaker.Allow hands out for an admitted call; give it back
// to Breaker.Done with the call's outcome.
type Ticket struct {
	gen   uint64
	probe bool
}

// Breaker is a circuit breaker. It opens when, over a sliding window
// holding at least MinimumCalls outcomes, the share of failures reaches
// FailureRatio; refuses every call while open; after CoolDown lets
// HalfOpenProbes probes through, and closes once they all succeed or opens
// again as soon as one fails. Outcomes of calls admitted before the last
// state change are not counted against the new state.
//
// The time is a parameter of every method, so the state machine is driven
// by tests without sleeping. Allow and Done take no lock while the breaker
// is closed; only state changes do.
type Breaker struct {
	p    BreakerPolicy
	base time.Time

	state     atomic.Int32
	gen       atomic.Uint64
	openUntil atomic.Int64 // nanoseconds since base
	admitted  atomic.Int64 // half-open probes let through
	succeeded atomic.Int64 // half-open probes that succeeded
	outcomes  *window      // a: calls, b: failures

	mu           sync.Mutex // serialises state changes
	onTransition func(from, to State)
}

// NewBreaker returns a closed breaker. base is any instant before the first
// call; the window counts from it. onTransition, if not nil, is called once
// per state change, after the change, outside any lock the breaker holds on
// its hot path.
func NewBreaker(p BreakerPolicy, base time.Time, onTransition func(from, to State)) *Breaker {
	return &Breaker{p: p, base: base, outcomes: newWindow(p.Window), onTransition: onTransition}
}

// State returns the state at now: an open breaker whose cool-down has
// passed reports half-open.
func (b *Breaker) State(now time.Time) State {
	s := State(b.state.Load())
	if s == StateOpen && nanos(now, b.base) >= b.openUntil.Load() {
		return StateHalfOpen
	}
	return s
}

// Allow asks whether a call may go to the dependency at now. It returns a
// ticket to pass to Done, or, when the call is refused, how long the refusal
// is expected to last and false.
func (b *Breaker) Allow(now time.Time) (Ticket, time.Duration, bool) {
	for {
		switch State(b.state.Load()) {
		case StateClosed:
			return Ticket{gen: b.gen.Load()}, 0, true
		case StateOpen:
			t := nanos(now, b.base)
			until := b.openUntil.Load()
			if t < until {
				return Ticket{}, time.Duration(until - t), false
			}
			b.transition(StateOpen, StateHalfOpen, t)
		case StateHalfOpen:
			gen := b.gen.Load()
			n := b.admitted.Add(1)
			if n > int64(b.p.HalfOpenProbes) {
				b.admitted.Add(-1)
				// The probes are out; the next decision comes when they return.
				return Ticket{}, 0, false
			}
			if b.gen.Load() != gen || State(b.state.Load()) != StateHalfOpen {
				b.admitted.Add(-1)
				continue // the state moved while this probe was admitted
			}
			return Ticket{gen: gen, probe: true}, 0, true
		}
	}
}

// Done records the outcome of a call admitted with t. latency is how long
// the call took; with a SlowCallThreshold, a slower success is a failure.
func (b *Breaker) Done(t Ticket, o Outcome, latency time.Duration, now time.Time) {
	if o == Success && b.p.SlowCallThreshold > 0 && latency > b.p.SlowCallThreshold {
		o = Failure
	}
	if t.gen != b.gen.Load() {
		return // admitted under an earlier state: says nothing about this one
	}
	n := nanos(now, b.base)
	if t.probe {
		switch o {
		case Ignored:
			b.admitted.Add(-1)
		case Failure:
			b.transitionFrom(t.gen, StateHalfOpen, StateOpen, n)
		case Success:
			if b.succeeded.Add(1) >= int64(b.p.HalfOpenProbes) {
				b.transitionFrom(t.gen, StateHalfOpen, StateClosed, n)
			}
		}
		return
	}
	switch o {
	case Success:
		b.outcomes.add(n, 1, 0)
	case Failure:
		b.outcomes.add(n, 1, 1)
	default:
		return
	}
	// A success can bring the window to MinimumCalls with enough failures
	// already in it: the ratio is judged after every counted outcome.
	calls, failures := b.outcomes.sum(n)
	if calls >= uint64(b.p.MinimumCalls) && float64(failures) >= b.p.FailureRatio*float64(calls) {
		b.transitionFrom(t.gen, StateClosed, StateOpen, n)
	}
}

// transitionFrom changes the state from `from` to `to` if the breaker is
// still in generation gen and state from.
func (b *Breaker) transitionFrom(gen uint64, from, to State, now int64) {
	b.mu.Lock()
	if b.gen.Load() != gen || State(b.state.Load()) != from {
		b.mu.Unlock()
		return
	}
	b.apply(to, now)
	b.mu.Unlock()
	if b.onTransition != nil {
		b.onTransition(from, to)
	}
}

func (b *Breaker) transition(from, to State, now int64) {
	b.transitionFrom(b.gen.Load(), from, to, now)
}

// apply sets the new state; b.mu is held.
func (b *Breaker) apply(to State, now int64) {
	switch to {
	case StateOpen:
		b.openUntil.Store(now + int64(b.p.CoolDown))
	case StateHalfOpen:
		b.admitted.Store(0)
		b.succeeded.Store(0)
	case StateClosed:
		b.outcomes.reset()
	}
	b.gen.Add(1)
	b.state.Store(int32(to))
}
