package runtime

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
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

// outcome is what one call told the breaker about the dependency.
type outcome uint8

// The three outcomes of a call.
const (
	// Success: the dependency answered (an error that is an answer, such as
	// NOT_FOUND, is a success of the dependency).
	outcomeSuccess outcome = iota
	// Failure: the dependency failed in a way the breaker counts.
	outcomeFailure
	// Ignored: the call says nothing about the dependency (the caller
	// cancelled it). A half-open probe that ends this way frees its place.
	outcomeIgnored
)

// ticket is what breaker.allow hands out for an admitted call; give it
// back to breaker.done with the call's outcome.
type ticket struct {
	gen   uint64
	probe bool
	// bystander: admitted while half-open without a probe (a stream on a
	// breaker that unary calls share); its success is not counted, its
	// failure opens the breaker again as a probe's would.
	bystander bool
}

// breaker is a circuit breaker. It opens when, over a sliding window
// holding at least MinimumCalls outcomes, the share of failures reaches
// FailureRatio; refuses every call while open; after CoolDown lets
// HalfOpenProbes probes through, and closes once they all succeed or opens
// again as soon as one fails. Outcomes of calls admitted before the last
// state change are not counted against the new state.
//
// The time is a parameter of every method, so the state machine is driven
// by tests without sleeping. allow and done take no lock while the breaker
// is closed; only state changes do.
type breaker struct {
	p    policy.Breaker
	base time.Time

	state atomic.Int32
	gen   atomic.Uint64
	// genState is gen<<2 | state, stored by apply after both: the one read
	// that gives a generation together with its own state. Read apart, a
	// transition between the two reads pairs the closed state with the
	// next state's generation, and a non-probe ticket of an open or
	// half-open generation is handed out.
	genState  atomic.Uint64
	openUntil atomic.Int64 // nanoseconds since base
	// probes packs, for the half-open state of one generation, the low 32
	// bits of that generation, the probes admitted and the probes that
	// succeeded (16 bits each), so that a probe can never be counted in a
	// generation other than its own.
	probes      atomic.Uint64
	outcomes    outcomeWindow // a: calls, b: failures; a window in time, or of the last WindowCalls calls
	lastFailure atomic.Int64  // nanoseconds since base of the last failure counted

	mu           sync.Mutex // serialises state changes
	onTransition func(from, to State)

	streams streamSet // the open streams holding a half-open probe
}

// maxProbes is the largest HalfOpenProbes the packed counters hold.
const maxProbes = contract.MaxHalfOpenProbes

// newBreaker returns a closed breaker. base is any instant before the first
// call; the window counts from it. onTransition, if not nil, is called once
// per state change, after the change, outside any lock the breaker holds on
// its hot path.
func newBreaker(p policy.Breaker, base time.Time, onTransition func(from, to State)) *breaker {
	p.HalfOpenProbes = min(p.HalfOpenProbes, maxProbes)
	b := &breaker{p: p, base: base, outcomes: newOutcomeWindow(p), onTransition: onTransition}
	b.lastFailure.Store(math.MinInt64 / 2)
	return b
}

// stateAt returns the state at n (nanoseconds since base): an open breaker
// whose cool-down has passed reports half-open.
func (b *breaker) stateAt(n int64) State {
	s := State(b.state.Load())
	if s == StateOpen && n >= b.openUntil.Load() {
		return StateHalfOpen
	}
	return s
}

// allow asks whether a call may go to the dependency. It returns a ticket
// to pass to done, or, when the call is refused, how long the refusal is
// expected to last and false. now (nanoseconds since base) is read only
// when it matters: a closed breaker admits without looking at the clock.
// With probe false, a half-open
// breaker admits the call without a probe, as a bystander whose outcome is
// not counted unless it fails: a long-lived stream must not hold a probe
// that the calls sharing the breaker need (see stream.go).
func (b *breaker) allow(now func() int64, probe bool) (ticket, time.Duration, bool) {
	for {
		gs := b.genState.Load()
		switch State(gs & 3) {
		case StateClosed:
			return ticket{gen: gs >> 2}, 0, true
		case StateOpen:
			t := now()
			until := b.openUntil.Load()
			if t < until {
				return ticket{}, time.Duration(until - t), false
			}
			b.transition(StateOpen, StateHalfOpen, t)
		case StateHalfOpen:
			gen := b.gen.Load()
			if !probe {
				if State(b.state.Load()) != StateHalfOpen {
					continue
				}
				return ticket{gen: gen, bystander: true}, 0, true
			}
			v := b.probes.Load()
			if v>>32 != gen&math.MaxUint32 || State(b.state.Load()) != StateHalfOpen {
				continue // the state moved on meanwhile
			}
			if int(v>>16&0xffff) >= b.p.HalfOpenProbes {
				// The probes are out; the next decision comes when they return.
				return ticket{}, 0, false
			}
			if b.probes.CompareAndSwap(v, v+1<<16) {
				return ticket{gen: gen, probe: true}, 0, true
			}
		}
	}
}

// closedTicket is allow's answer while the breaker is closed, small
// enough to be inlined where a unary attempt is admitted: ok is false when
// the breaker is not closed, and allow must decide.
func (b *breaker) closedTicket() (ticket, bool) {
	if gs := b.genState.Load(); State(gs&3) == StateClosed {
		return ticket{gen: gs >> 2}, true
	}
	return ticket{}, false
}

// done records the outcome of a call admitted with t, at n (nanoseconds
// since base). latency is how long the call took; with a
// SlowCallThreshold, a slower success is a failure.
func (b *breaker) done(t ticket, o outcome, latency time.Duration, n int64) {
	if o == outcomeSuccess && b.p.SlowCallThreshold > 0 && latency > b.p.SlowCallThreshold {
		o = outcomeFailure
	}
	if t.gen != b.gen.Load() {
		return // admitted under an earlier state: says nothing about this one
	}
	if t.bystander {
		// Admitted beside the probes: it cannot close the breaker, but a
		// failure is as clear an answer as a probe's.
		if o == outcomeFailure {
			b.transitionFrom(t.gen, StateHalfOpen, StateOpen, n)
		}
		return
	}
	if t.probe {
		b.probeDone(t.gen, o, n)
		return
	}
	switch o {
	case outcomeSuccess:
		b.outcomes.Add(n, 1, 0)
		// A success can bring the window to MinimumCalls with enough
		// failures already in it, but only if a failure is in the window.
		if b.quiet(n) {
			return
		}
	case outcomeFailure:
		b.lastFailure.Store(n)
		b.outcomes.Add(n, 1, 1)
	default:
		return
	}
	b.judge(t.gen, n)
}

// doneEarly records a success when the time only places it in a bucket of
// the window: early is a reading taken during the call, at most one bucket
// (Window/10) before its end, such as the start of an attempt whose
// timeout is no longer than a bucket. While a failure is in the window the
// ratio is judged at now(), the exact time, as done does. It returns
// false, recording nothing, for an outcome that needs the exact time of
// the end: a probe's or a bystander's (they change the state), or any
// with a SlowCallThreshold (the latency decides it); the caller then
// calls done.
//
// early ≤ the true time, so "no failure within Window of early" implies
// none within Window of now: the ratio is never left unjudged when it
// could have reached FailureRatio.
func (b *breaker) doneEarly(t ticket, early int64, now func() int64) bool {
	if t.probe || t.bystander || b.p.SlowCallThreshold > 0 {
		return false
	}
	if t.gen != b.gen.Load() {
		return true // admitted under an earlier state: says nothing about this one
	}
	b.outcomes.Add(early, 1, 0)
	if b.quiet(early) {
		return true
	}
	b.judge(t.gen, now())
	return true
}

// judge opens the closed breaker of generation gen if, at n, the window
// holds at least MinimumCalls outcomes and a share of failures of at least
// FailureRatio.
func (b *breaker) judge(gen uint64, n int64) {
	calls, failures := b.outcomes.Sum(n)
	// The share, not failures ≥ ratio × calls: the product of a decimal
	// ratio rounds (0.55 × 100 is 55.00000000000001), and the breaker
	// stayed closed at exactly the ratio. A correctly rounded quotient
	// equal to the decimal is the double the policy holds. calls ≥
	// MinimumCalls ≥ 1.
	if calls >= uint64(b.p.MinimumCalls) && float64(failures)/float64(calls) >= b.p.FailureRatio {
		b.transitionFrom(gen, StateClosed, StateOpen, n)
	}
}

// probeDone records the outcome of a half-open probe of generation gen.
func (b *breaker) probeDone(gen uint64, o outcome, n int64) {
	if o == outcomeFailure {
		b.transitionFrom(gen, StateHalfOpen, StateOpen, n)
		return
	}
	for {
		v := b.probes.Load()
		if v>>32 != gen&math.MaxUint32 {
			return // another generation's counters
		}
		next := v - 1<<16 // Ignored: the probe frees its place
		if o == outcomeSuccess {
			next = v + 1
		}
		if !b.probes.CompareAndSwap(v, next) {
			continue
		}
		if o == outcomeSuccess && int(next&0xffff) >= b.p.HalfOpenProbes {
			b.transitionFrom(gen, StateHalfOpen, StateClosed, n)
		}
		return
	}
}

// transitionFrom changes the state from `from` to `to` if the breaker is
// still in generation gen and state from.
func (b *breaker) transitionFrom(gen uint64, from, to State, now int64) {
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

func (b *breaker) transition(from, to State, now int64) {
	b.transitionFrom(b.gen.Load(), from, to, now)
}

// apply sets the new state; b.mu is held.
func (b *breaker) apply(to State, now int64) {
	gen := b.gen.Load() + 1
	switch to {
	case StateOpen:
		b.openUntil.Store(addSat(now, b.p.CoolDown)) // never wraps to an instant half-open
	case StateHalfOpen:
		b.probes.Store((gen & math.MaxUint32) << 32)
	case StateClosed:
		b.outcomes.Reset()
		b.lastFailure.Store(math.MinInt64 / 2)
	}
	b.gen.Store(gen)
	b.state.Store(int32(to))
	b.genState.Store(gen<<2 | uint64(to))
}
