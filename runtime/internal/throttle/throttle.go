// Package throttle is adaptive client-side throttling, as the Google SRE book
// describes it ("Handling Overload"): a client that sees its dependency
// refuse more and more of its requests starts refusing some locally, before
// they cost the dependency anything.
//
// # Algorithm
//
// Over a sliding window the throttler counts the requests the caller made
// (those it refused locally included) and the accepts, the requests the
// dependency answered. Each new request is refused locally with probability
//
//	max(0, (requests − K × accepts) / (requests + 1))
//
// capped at MaxRefusal. While the dependency accepts more than one request
// in K nothing is refused and Allow costs one read of the window. When it
// accepts none, the probability climbs towards MaxRefusal and the load that
// reaches the dependency falls to 1 − MaxRefusal of the demand; those
// requests are the probes that see it recover, and each accept they bring
// back lowers the probability for the next requests.
//
// # Parameters and defaults
//
//   - K = 2: refusals begin once fewer than half the requests are accepted.
//     The book's value; 1.1 would refuse sooner, at the cost of refusing
//     requests a dependency that sheds a few could have served.
//   - Window = 5 s (10 buckets of 0.5 s). The window does not change how
//     fast the throttler reacts (the probability passes 0.9 at the tenth
//     refused request in a row), only how fast it forgets: after a total
//     outage at 100 requests/s the first accept comes after about 0.1 s,
//     but the refusals fade out only over about two windows, because the
//     window must first forget the outage and then hold more accepts than
//     the recovery's own local refusals (TestRecoveryTimeAt100PerSecond:
//     under 50 % after about 8 s, none after about 10 s). That is about
//     the default breaker's cool-down, and 5 s still holds 50 requests of a
//     client that makes 10 a second. The book's two minutes would hold a
//     recovered dependency at a tenth of its traffic for three minutes; 1 s
//     would judge a slow client's dependency on one or two requests.
//   - MaxRefusal = 0.9: at most nine requests in ten are refused locally, so
//     a tenth keep probing the dependency and recovery is seen within a few
//     requests. 1 is refused: a throttler that refused everything would
//     never see an accept again.
//
// # Where it goes
//
// The throttler judges attempts, the requests that reach the dependency: in
// the runtime's layer order it sits inside the retry loop, in front of the
// adaptive concurrency limit and the circuit breaker, so that each attempt,
// first or retry, asks it first. Its refusals are local: they cost no permit
// and no breaker probe, are not failures of the dependency, and end the
// retry loop as an open breaker does. Record is called once per attempt that
// was allowed and reached the dependency, with accepted false for an
// overload refusal, a timeout or an unavailable dependency; an attempt the
// caller cancelled is not recorded. The retry budget is independent and
// asked before it: a retry must fit the budget and then pass the throttler
// like any attempt. The throttler is the gradual, probabilistic first line;
// the breaker stays the last resort that cuts every call once the failure
// ratio passes its threshold.
package throttle

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/internal/window"
)

// Policy configures a Throttler. A zero field takes its default from
// Defaults.
type Policy struct {
	// K is how many requests per accept the dependency may refuse before
	// the throttler refuses any: refusals begin once requests exceed K
	// times accepts. At least 1; default 2.
	K float64
	// Window is the sliding window over which requests and accepts are
	// counted, in 10 buckets. Default 5 s.
	Window time.Duration
	// MaxRefusal caps the probability of a local refusal, in (0, 1), so that
	// some requests always reach the dependency and see it recover. Default
	// 0.9.
	MaxRefusal float64
}

// Defaults is the policy a zero Policy stands for.
var Defaults = Policy{K: contract.ThrottleK, Window: contract.ThrottleWindow, MaxRefusal: contract.ThrottleMaxRefusal}

// withDefaults fills the zero fields of p from Defaults and checks the
// result.
func (p Policy) withDefaults() (Policy, error) {
	if p.K == 0 {
		p.K = Defaults.K
	}
	if p.Window == 0 {
		p.Window = Defaults.Window
	}
	if p.MaxRefusal == 0 {
		p.MaxRefusal = Defaults.MaxRefusal
	}
	// The checks and words the plugin, the override loader and
	// policy.Service.Problems use (internal/check), each behind the
	// option it refuses.
	for _, c := range []struct{ option, problem string }{
		{"k ", check.ThrottleK(p.K)},
		{"window ", check.AdaptiveWindow(p.Window)},
		{"max_refusal ", check.MaxRefusal(p.MaxRefusal)},
	} {
		if c.problem != "" {
			return p, fmt.Errorf("throttle: %s%s", c.option, c.problem)
		}
	}
	return p, nil
}

// Throttler refuses requests locally with a probability that grows as the
// dependency accepts fewer of them. It is safe for concurrent use; Allow and
// Record take no lock and allocate nothing.
type Throttler struct {
	p      Policy
	base   time.Time
	w      *window.Time // a: requests, b: accepts
	random func() float64
}

// New returns a throttler that refuses nothing yet. base is any instant
// before the first call; the window counts from it. random draws uniformly
// from [0, 1) and must be safe for concurrent use; nil means math/rand/v2's
// Float64. Tests pass a seeded source to make the refusals deterministic.
func New(p Policy, base time.Time, random func() float64) (*Throttler, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	if random == nil {
		random = rand.Float64
	}
	return &Throttler{p: p, base: base, w: window.NewTime(p.Window), random: random}, nil
}

// Policy returns the policy in force, defaults applied.
func (t *Throttler) Policy() Policy { return t.p }

// Allow reports whether a request may go to the dependency at now. A
// request it refuses is counted as a request at once; one it allows is
// counted when Record reports how it ended.
func (t *Throttler) Allow(now time.Time) bool { return t.AllowAt(int64(now.Sub(t.base))) }

// AllowAt is Allow at n nanoseconds after the throttler's base, for a
// caller that keeps its clock as such (the runtime's client, whose base
// is the same): no time.Time is made.
func (t *Throttler) AllowAt(n int64) bool {
	p := t.refusal(n)
	if p == 0 || t.random() >= p {
		return true
	}
	t.w.Add(n, 1, 0)
	return false
}

// Record counts a request that Allow let through and that reached the
// dependency, ended at now; accepted says whether the dependency served it
// (an answer, even an error such as NOT_FOUND) rather than refused it
// (overloaded, unavailable, timed out). A request the caller cancelled is
// not recorded.
func (t *Throttler) Record(now time.Time, accepted bool) {
	t.RecordAt(int64(now.Sub(t.base)), accepted)
}

// RecordAt is Record at n nanoseconds after the throttler's base.
func (t *Throttler) RecordAt(n int64, accepted bool) {
	var a uint64
	if accepted {
		a = 1
	}
	t.w.Add(n, 1, a)
}

// RefusalProbability returns the probability with which Allow would refuse
// a request at now, for a gauge.
func (t *Throttler) RefusalProbability(now time.Time) float64 {
	return t.refusal(int64(now.Sub(t.base)))
}

// RefusalProbabilityAt is RefusalProbability at n nanoseconds after the
// throttler's base.
func (t *Throttler) RefusalProbabilityAt(n int64) float64 { return t.refusal(n) }

func (t *Throttler) refusal(n int64) float64 {
	requests, accepts := t.w.Sum(n)
	r := float64(requests)
	p := (r - t.p.K*float64(accepts)) / (r + 1)
	if !(p > 0) {
		return 0
	}
	return min(p, t.p.MaxRefusal)
}
