package adaptive

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/contract"
)

// Policy configures a Limiter. A zero field takes its default from Defaults
// (InitialLimit is then also kept within [MinLimit, MaxLimit]).
type Policy struct {
	// MinLimit is the lowest the limit falls: the calls let through while
	// the dependency is at its worst. At least 1; default 1.
	MinLimit int
	// MaxLimit is the highest the limit grows. Default 100; under a static
	// bulkhead, at most its permits (WithCeiling).
	MaxLimit int
	// InitialLimit is the limit before any call has come back, in
	// [MinLimit, MaxLimit]. Default 20, or MaxLimit if lower.
	InitialLimit int
	// Tolerance is how many times slower than the baseline a round may be
	// before the limit shrinks; at least 1. Default 1.5.
	Tolerance float64
	// Smoothing is the share of each latency-driven change of the limit
	// applied per round, in (0, 1]. Drops are not smoothed. Default 0.5.
	Smoothing float64
	// BaselineWindow is how long round RTTs count towards the baseline,
	// the dependency's unloaded latency (the package doc: the smallest of
	// its ten buckets' 10th percentiles and of the round it began with,
	// which counts while rounds come).
	// Default 30 s.
	BaselineWindow time.Duration
}

// Defaults is the policy a zero Policy stands for.
var Defaults = Policy{
	MinLimit:       contract.AdaptiveMinLimit,
	MaxLimit:       contract.AdaptiveMaxLimit,
	InitialLimit:   contract.AdaptiveInitialLimit,
	Tolerance:      contract.AdaptiveTolerance,
	Smoothing:      contract.AdaptiveSmoothing,
	BaselineWindow: contract.AdaptiveBaselineWindow,
}

// MaxLimit is the largest MaxLimit a Policy may have.
const MaxLimit = contract.MaxAdaptiveLimit

// maxRTT caps one call's RTT: a round's median of an hour or more says
// as much as an hour.
const maxRTT = int64(time.Hour)

// WithCeiling returns p under a static bulkhead of permits: MaxLimit, its
// default included, is at most permits, and so is the default
// InitialLimit. A permits below 1 leaves p as it is.
func (p Policy) WithCeiling(permits int) Policy {
	if permits < 1 {
		return p
	}
	if p.MaxLimit == 0 {
		p.MaxLimit = Defaults.MaxLimit
	}
	p.MaxLimit = min(p.MaxLimit, permits)
	return p
}

// withDefaults fills the zero fields of p from Defaults and checks the
// result.
func (p Policy) withDefaults() (Policy, error) {
	if p.MinLimit == 0 {
		p.MinLimit = Defaults.MinLimit
	}
	if p.MaxLimit == 0 {
		p.MaxLimit = Defaults.MaxLimit
	}
	if p.InitialLimit == 0 {
		p.InitialLimit = min(max(Defaults.InitialLimit, p.MinLimit), p.MaxLimit)
	}
	if p.Tolerance == 0 {
		p.Tolerance = Defaults.Tolerance
	}
	if p.Smoothing == 0 {
		p.Smoothing = Defaults.Smoothing
	}
	if p.BaselineWindow == 0 {
		p.BaselineWindow = Defaults.BaselineWindow
	}
	// The checks and words the plugin, the override loader and
	// policy.Service.Problems use (internal/check), each behind the
	// option it refuses.
	for _, c := range []struct{ option, problem string }{
		{"min_limit ", check.AtLeastOne(int64(p.MinLimit))},
		{"max_limit ", check.AdaptiveMaxLimit(int64(p.MaxLimit))},
		{"initial_limit ", check.AtLeastOne(int64(p.InitialLimit))},
		{"tolerance ", check.Tolerance(p.Tolerance)},
		{"smoothing ", check.Ratio(p.Smoothing)},
		{"baseline_window ", check.AdaptiveWindow(p.BaselineWindow)},
		{"min_limit ", check.MinAboveMax(int64(p.MinLimit), int64(p.MaxLimit), "").Options()},
		{"initial_limit ", check.InitialOutside(int64(p.InitialLimit), int64(p.MinLimit), int64(p.MaxLimit)).Options()},
	} {
		if c.problem != "" {
			return p, fmt.Errorf("adaptive: %s%s", c.option, c.problem)
		}
	}
	return p, nil
}

// Outcome is what a call admitted by the limiter says about the dependency.
type Outcome uint8

// The three outcomes of a call.
const (
	// Success: the dependency answered (an error that is an answer, such as
	// NOT_FOUND, is a success); its RTT is a latency sample.
	Success Outcome = iota
	// Dropped: the call timed out or the dependency refused it as
	// overloaded. The limit halves.
	Dropped
	// Ignored: the call says nothing about the dependency (the caller
	// cancelled it, or a later local layer refused it). Only the permit is
	// returned.
	Ignored
)

// Token is what Acquire hands out for an admitted call; give it back to
// Release exactly once. The zero Token, which a refused Acquire returns, is
// released as a no-op.
type Token struct {
	round uint64
	load  int32 // the calls in flight with this one when it was admitted
	held  bool
}

// Limiter is an adaptive concurrency limit (see the package doc). It is
// safe for concurrent use. Acquire is one compare-and-swap and never
// blocks; Release takes the limiter's mutex for a few arithmetic operations.
// Neither allocates, but for ReleaseAs the first time it sees a class.
type Limiter struct {
	p    Policy
	base time.Time

	limit    atomic.Int64  // the integer part of value: what Acquire admits up to
	inFlight atomic.Int64  // calls admitted and not released
	round    atomic.Uint64 // the current round; a Token carries the round of its Acquire

	mu       sync.Mutex
	value    float64 // the limit
	halvedIn uint64  // the round that began at the last halving
	sampled  int64   // when the current round's last success was counted, nanoseconds after base
	peak     int64   // the most calls in flight seen by a Release of the current round
	load     int64   // Σ Token.load over the current round's successes
	// ref is the reference round of the current run of rounds too slow for
	// the tolerance (see notQueueing): the mean calls in flight its
	// successes were admitted with (0 for no run), its gradient, and
	// whether the round before this one already said not queueing.
	ref struct {
		load     float64
		gradient float64
		gload    float64 // the load of the round whose gradient is gradient
		once     bool
	}
	// classes are the kinds of answer with a latency of their own
	// (ReleaseAs), each with its baseline and the successes of the current
	// round; touched lists those that have some.
	classes []class
	touched []int
}

// class is one kind of answer's latency: its baseline, and the RTTs of its
// successes in the current round.
type class struct {
	baseline baseline
	// rtts are the RTTs of the round's first roundSamples successes
	// (nanoseconds), of which the round's RTT is the median.
	rtts      [roundSamples]int64
	successes int64
	least     int64 // the baseline its last round was judged by; 0 before one
}

// MaxClasses bounds the classes of a Limiter: a class passed to ReleaseAs
// outside [0, MaxClasses) counts as class 0.
const MaxClasses = 1 << 12

// New returns a limiter at p's initial limit. base is any instant before
// the first call; the baseline window counts from it.
func New(p Policy, base time.Time) (*Limiter, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Limiter{p: p, base: base, value: float64(p.InitialLimit)}
	l.classes = []class{{baseline: newBaseline(int64(p.BaselineWindow))}}
	l.limit.Store(int64(p.InitialLimit))
	return l, nil
}

// Policy returns the policy in force, defaults applied.
func (l *Limiter) Policy() Policy { return l.p }

// Limit returns the current limit, for a gauge.
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// InFlight returns the calls admitted and not yet released.
func (l *Limiter) InFlight() int { return int(l.inFlight.Load()) }

// Acquire admits a call if fewer than the limit are in flight, without
// waiting. It returns the token to Release, or false when the call is to be
// refused at once.
func (l *Limiter) Acquire() (Token, bool) {
	for {
		n := l.inFlight.Load()
		if n >= l.limit.Load() {
			return Token{}, false
		}
		if l.inFlight.CompareAndSwap(n, n+1) {
			return Token{round: l.round.Load(), load: int32(min(n+1, math.MaxInt32)), held: true}, true
		}
	}
}

// Release returns the permit of t, for a call that ended at now after rtt
// with outcome o. A Success with an rtt of zero or less carries no sample
// and counts as Ignored; an rtt over an hour counts as an hour.
func (l *Limiter) Release(t Token, o Outcome, rtt time.Duration, now time.Time) {
	l.ReleaseAt(t, o, rtt, int64(now.Sub(l.base)))
}

// ReleaseAt is Release at n nanoseconds after the limiter's base, for a
// caller that keeps its clock as such (the runtime's client, whose base is
// the same): no time.Time is made.
func (l *Limiter) ReleaseAt(t Token, o Outcome, rtt time.Duration, now int64) {
	l.ReleaseAs(t, o, 0, rtt, now)
}

// ReleaseAs is ReleaseAt for a success of the given class: a kind of answer
// whose latency is its own (a method of the dependency, its error answers
// apart from its others). Each class has its own baseline, and a round is
// judged by how much slower than its baseline each of its successes was, so
// that a round of fast answers (one method's, or errors that cost the
// dependency nothing) does not set the baseline the slower ones are then
// taken for queueing against. A class outside [0, MaxClasses) counts as 0.
func (l *Limiter) ReleaseAs(t Token, o Outcome, cls int, rtt time.Duration, now int64) {
	if !t.held {
		return
	}
	n := l.inFlight.Add(-1) + 1 // in flight with this call
	if o == Success && rtt <= 0 || o > Ignored {
		o = Ignored
	}
	if o == Ignored {
		return
	}
	l.mu.Lock()
	switch {
	case o == Dropped:
		l.ref.load = 0
		if t.round >= l.halvedIn {
			l.halvedIn = l.nextRound(max(l.value/2, float64(l.p.MinLimit)))
		}
	default:
		if cls < 0 || cls >= MaxClasses {
			cls = 0
		}
		if len(l.touched) > 0 && now-l.sampled > int64(l.p.BaselineWindow) {
			// The round's successes so far came before a spell of none
			// longer than the baseline window: the last answers of a
			// burst that may have queued, of a past the window has
			// forgotten. Ended by the next burst's first answer, the
			// round would have set its median as the anchor of the window
			// that burst begins (TestAttack30dPeriodicBurstsRatchetTheBaseline:
			// each burst's queue the next one's baseline). They are dropped.
			for _, i := range l.touched {
				l.class(i).successes = 0
			}
			l.touched, l.peak, l.load = l.touched[:0], 0, 0
		}
		l.sampled = now
		c := l.class(cls)
		if c.successes == 0 {
			l.touched = append(l.touched, cls)
		}
		if c.successes < roundSamples {
			c.rtts[c.successes] = min(int64(rtt), maxRTT)
		}
		c.successes++
		l.peak = max(l.peak, n)
		l.load += int64(t.load)
		if t.round == l.round.Load() {
			l.endRound(max(now, 0))
		}
	}
	l.mu.Unlock()
}

// class returns the class cls, in [0, MaxClasses), adding the classes up
// to it on first sight; l.mu is held.
func (l *Limiter) class(cls int) *class {
	for len(l.classes) <= cls {
		l.classes = append(l.classes, class{baseline: newBaseline(int64(l.p.BaselineWindow))})
	}
	return &l.classes[cls]
}

// endRound moves the limit by the round that ends at now; l.mu is held.
// The round's gradient is the mean, over its successes, of how many times
// its class's baseline its class's median took (for one class: the
// round's median RTT over the baseline).
func (l *Limiter) endRound(now int64) {
	var slower float64 // Σ successes × median RTT / baseline, per class
	var before float64 // the same against the baselines of each class's last round
	var successes int64
	for _, i := range l.touched {
		c := l.class(i)
		if c.successes == 0 {
			continue
		}
		rtt := c.median()
		least := c.baseline.observe(now, rtt)
		if c.least == 0 {
			c.least = least
		}
		slower += float64(c.successes) * float64(rtt) / float64(max(least, 1))
		before += float64(c.successes) * float64(rtt) / float64(max(c.least, 1))
		c.least = least
		successes += c.successes
	}
	gradient := slower / float64(successes)
	if l.ref.load != 0 && before != slower {
		// A baseline moved (the window forgot its least): the reference's
		// gradient is rescaled to the baselines this round is judged by.
		l.ref.gradient *= slower / before
	}
	if l.notQueueing(gradient, float64(l.load)/float64(successes)) {
		// The latency this round measured is the dependency's own now:
		// each class's baseline starts again from it.
		for _, i := range l.touched {
			if c := l.class(i); c.successes > 0 {
				c.baseline.restart(now, c.median())
			}
		}
		gradient = 1
	}
	target := l.value
	if gradient <= l.p.Tolerance {
		if 2*float64(l.peak) >= math.Floor(l.value) {
			target = l.value + math.Sqrt(l.value)
		}
	} else {
		target = l.value * max(0.5, l.p.Tolerance/gradient)
	}
	l.nextRound(l.value + l.p.Smoothing*(target-l.value))
}

// notQueueing reports whether a round of the given gradient, admitted with
// load calls in flight on average, shows that the dependency's latency
// moved without a queue. A queue's wait shortens with the calls ahead in it
// (by Little's law, in proportion to them); a dependency that became
// slower, or whose fastest rounds were luck, does not. So a run of rounds
// too slow for the tolerance keeps a reference: the load of its first
// round, and the gradient of its latest round at more than three quarters
// of that load (the latest, for a queue that still builds grows slower
// round by round). Two rounds of the run in a row admitted with at most
// three quarters of that load (or at the lowest limit, where fewer cannot
// be tried), neither 15 % faster than the reference, say not queueing (two,
// so that one round straddling a change of the dependency's capacity, or
// of luck, does not); one that is faster becomes the reference for the
// rounds at still fewer calls. A round within the tolerance, or a drop,
// ends the run. l.mu is held.
func (l *Limiter) notQueueing(gradient, load float64) bool {
	r := &l.ref
	switch {
	case gradient <= l.p.Tolerance:
		r.load = 0
		return false
	case r.load != 0 && 4*load > 3*r.load && l.value > float64(l.p.MinLimit):
		r.gradient, r.gload, r.once = gradient, load, false
		return false
	case r.load != 0 && 4*load > 3*r.gload && l.value > float64(l.p.MinLimit):
		// Fewer calls than the run's first round, but not a quarter fewer
		// than the round whose gradient is the reference: too close to it
		// to tell a queue from a steady latency; and not in a row with an
		// earlier round that said not queueing.
		r.once = false
		return false
	case r.load == 0 || 20*gradient < 17*r.gradient:
		r.load, r.gradient, r.gload, r.once = load, gradient, load, false
		return false
	case !r.once:
		r.once = true
		return false
	}
	r.load = 0
	return true
}

// nextRound sets the limit to v, kept within [MinLimit, MaxLimit], and
// begins a new round, which it returns; l.mu is held.
func (l *Limiter) nextRound(v float64) uint64 {
	l.value = min(max(v, float64(l.p.MinLimit)), float64(l.p.MaxLimit))
	l.limit.Store(int64(l.value))
	for _, i := range l.touched {
		c := l.class(i)
		c.successes = 0
	}
	l.touched, l.peak, l.load = l.touched[:0], 0, 0
	return l.round.Add(1)
}

// roundSamples bounds the RTTs a class keeps of a round: its median is
// that of the round's first roundSamples successes.
const roundSamples = 32

// median returns the median of the RTTs c kept of the round, which
// has at least one; it sorts them in place.
func (c *class) median() int64 {
	r := c.rtts[:min(c.successes, roundSamples)]
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && r[j] < r[j-1]; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
	a, b := r[(len(r)-1)/2], r[len(r)/2]
	return a/2 + b/2 + (a%2+b%2)/2 // (a+b)/2 without overflow, and 1 ns stays 1
}
