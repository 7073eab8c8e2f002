package runtime

import (
	"math"
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
	// bystander: admitted while half-open without a probe (a stream on a
	// breaker that unary calls share); its success is not counted, its
	// failure opens the breaker again as a probe's would.
	bystander bool
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
	// probes packs, for the half-open state of one generation, the low 32
	// bits of that generation, the probes admitted and the probes that
	// succeeded (16 bits each), so that a probe can never be counted in a
	// generation other than its own.
	probes      atomic.Uint64
	outcomes    outcomeWindow // a: calls, b: failures
	lastFailure atomic.Int64  // nanoseconds since base of the last failure counted

	mu           sync.Mutex // serialises state changes
	onTransition func(from, to State)
}

// maxProbes is the largest HalfOpenProbes the packed counters hold.
const maxProbes = 1<<16 - 1

// NewBreaker returns a closed breaker. base is any instant before the first
// call; the window counts from it. onTransition, if not nil, is called once
// per state change, after the change, outside any lock the breaker holds on
// its hot path.
func NewBreaker(p BreakerPolicy, base time.Time, onTransition func(from, to State)) *Breaker {
	p.HalfOpenProbes = min(p.HalfOpenProbes, maxProbes)
	b := &Breaker{p: p, base: base, outcomes: newOutcomeWindow(p), onTransition: onTransition}
	b.lastFailure.Store(math.MinInt64 / 2)
	return b
}

// State returns the state at now: an open breaker whose cool-down has
// passed reports half-open.
func (b *Breaker) State(now time.Time) State { return b.stateAt(nanos(now, b.base)) }

func (b *Breaker) stateAt(n int64) State {
	s := State(b.state.Load())
	if s == StateOpen && n >= b.openUntil.Load() {
		return StateHalfOpen
	}
	return s
}

// Allow asks whether a call may go to the dependency at now. It returns a
// ticket to pass to Done, or, when the call is refused, how long the refusal
// is expected to last and false.
func (b *Breaker) Allow(now time.Time) (Ticket, time.Duration, bool) {
	return b.allow(func() int64 { return nanos(now, b.base) }, true)
}

// allow is Allow with the time read only when it matters: a closed breaker
// admits without looking at the clock. With probe false, a half-open
// breaker admits the call without a probe, as a bystander whose outcome is
// not counted unless it fails: a long-lived stream must not hold a probe
// that the calls sharing the breaker need (see stream.go).
func (b *Breaker) allow(now func() int64, probe bool) (Ticket, time.Duration, bool) {
	for {
		switch State(b.state.Load()) {
		case StateClosed:
			return Ticket{gen: b.gen.Load()}, 0, true
		case StateOpen:
			t := now()
			until := b.openUntil.Load()
			if t < until {
				return Ticket{}, time.Duration(until - t), false
			}
			b.transition(StateOpen, StateHalfOpen, t)
		case StateHalfOpen:
			gen := b.gen.Load()
			if !probe {
				if State(b.state.Load()) != StateHalfOpen {
					continue
				}
				return Ticket{gen: gen, bystander: true}, 0, true
			}
			v := b.probes.Load()
			if v>>32 != gen&math.MaxUint32 || State(b.state.Load()) != StateHalfOpen {
				continue // the state moved on meanwhile
			}
			if int(v>>16&0xffff) >= b.p.HalfOpenProbes {
				// The probes are out; the next decision comes when they return.
				return Ticket{}, 0, false
			}
			if b.probes.CompareAndSwap(v, v+1<<16) {
				return Ticket{gen: gen, probe: true}, 0, true
			}
		}
	}
}

// Done records the outcome of a call admitted with t. latency is how long
// the call took; with a SlowCallThreshold, a slower success is a failure.
func (b *Breaker) Done(t Ticket, o Outcome, latency time.Duration, now time.Time) {
	b.done(t, o, latency, nanos(now, b.base))
}

func (b *Breaker) done(t Ticket, o Outcome, latency time.Duration, n int64) {
	if o == Success && b.p.SlowCallThreshold > 0 && latency > b.p.SlowCallThreshold {
		o = Failure
	}
	if t.gen != b.gen.Load() {
		return // admitted under an earlier state: says nothing about this one
	}
	if t.bystander {
		// Admitted beside the probes: it cannot close the breaker, but a
		// failure is as clear an answer as a probe's.
		if o == Failure {
			b.transitionFrom(t.gen, StateHalfOpen, StateOpen, n)
		}
		return
	}
	if t.probe {
		b.probeDone(t.gen, o, n)
		return
	}
	switch o {
	case Success:
		b.outcomes.add(n, 1, 0)
		// A success can bring the window to MinimumCalls with enough
		// failures already in it, but only if a failure is in the window.
		if n-b.lastFailure.Load() > int64(b.p.windowSpan()) {
			return
		}
	case Failure:
		b.lastFailure.Store(n)
		b.outcomes.add(n, 1, 1)
	default:
		return
	}
	calls, failures := b.outcomes.sum(n)
	if calls >= uint64(b.p.MinimumCalls) && float64(failures) >= b.p.FailureRatio*float64(calls) {
		b.transitionFrom(t.gen, StateClosed, StateOpen, n)
	}
}

// probeDone records the outcome of a half-open probe of generation gen.
func (b *Breaker) probeDone(gen uint64, o Outcome, n int64) {
	if o == Failure {
		b.transitionFrom(gen, StateHalfOpen, StateOpen, n)
		return
	}
	for {
		v := b.probes.Load()
		if v>>32 != gen&math.MaxUint32 {
			return // another generation's counters
		}
		next := v - 1<<16 // Ignored: the probe frees its place
		if o == Success {
			next = v + 1
		}
		if !b.probes.CompareAndSwap(v, next) {
			continue
		}
		if o == Success && int(next&0xffff) >= b.p.HalfOpenProbes {
			b.transitionFrom(gen, StateHalfOpen, StateClosed, n)
		}
		return
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
	gen := b.gen.Load() + 1
	switch to {
	case StateOpen:
		b.openUntil.Store(addSat(now, b.p.CoolDown)) // never wraps to an instant half-open
	case StateHalfOpen:
		b.probes.Store((gen & math.MaxUint32) << 32)
	case StateClosed:
		b.outcomes.reset()
		b.lastFailure.Store(math.MinInt64 / 2)
	}
	b.gen.Store(gen)
	b.state.Store(int32(to))
}
