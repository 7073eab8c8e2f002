package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/internal/adaptive"
	"github.com/go-resilient/resilient/runtime/internal/throttle"
	"github.com/go-resilient/resilient/runtime/policy"
)

var (
	// ErrConcurrencyLimited: the adaptive concurrency limit towards the
	// dependency had as many attempts in flight as it currently allows; the
	// attempt was refused at once, without reaching the dependency. Code
	// RESOURCE_EXHAUSTED.
	ErrConcurrencyLimited = errors.New("adaptive concurrency limit reached")
	// ErrThrottled: the client-side throttler refused the attempt locally,
	// because the dependency has lately refused most of what it was sent.
	// Code UNAVAILABLE.
	ErrThrottled = errors.New("throttled")
)

func concurrencyLimitedError(dep, method string, limit int) error {
	return &Error{Code: codes.ResourceExhausted, Dependency: dep, Method: method, Reason: ErrConcurrencyLimited,
		Detail: fmt.Sprintf("adaptive concurrency limit towards %s reached: %d attempts in flight", dep, limit)}
}

func throttledError(dep, method string, p float64) error {
	return &Error{Code: codes.Unavailable, Dependency: dep, Method: method, Reason: ErrThrottled,
		Detail: fmt.Sprintf("throttled locally: %s refused most recent requests, %.0f %% of attempts are refused", dep, 100*p)}
}

// episodeQuiet is how long after its last refusal an adaptive layer must
// admit an attempt for its episode of refusals to be over, so that the
// next refusal is reported again.
const episodeQuiet = time.Second

// concurrencyLimit is the adaptive limit of a dependency (or of a method
// that has its own), with what it reports.
type concurrencyLimit struct {
	l     *adaptive.Limiter
	label string // "shared" or the method's short name
	// classes is how many latency classes bind has given out: each method
	// of the limit has two, its answers and its error answers.
	classes int

	gauge prometheus.Gauge // nil without metrics
	// limiting is set from the first refusal of an episode, reported once,
	// to the first admission episodeQuiet after the last refusal.
	limiting    atomic.Bool
	lastRefusal atomic.Int64 // nanoseconds since the client's base; kept only with events
}

// clientThrottle is the throttler of a dependency, with what it reports.
type clientThrottle struct {
	t           *throttle.Throttler
	gauge       prometheus.Gauge // nil without metrics
	throttling  atomic.Bool
	lastRefusal atomic.Int64
}

// adaptiveMetrics are the metrics of a method's adaptive layers; nil
// without a registerer.
type adaptiveMetrics struct {
	limited   prometheus.Counter // nil without a limit
	throttled prometheus.Counter // nil without a throttler
}

// adaptiveCollectors are the metric families of the adaptive layers,
// registered only by clients that have one.
type adaptiveCollectors struct {
	limit     *prometheus.GaugeVec   // dependency, limiter
	limited   *prometheus.CounterVec // dependency, method
	refusal   *prometheus.GaugeVec   // dependency
	throttled *prometheus.CounterVec // dependency, method
}

func newAdaptiveCollectors(r prometheus.Registerer) (*adaptiveCollectors, error) {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "resilient", Subsystem: "client", Name: name, Help: help}
	}
	c := &adaptiveCollectors{
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("adaptive_limit",
			"Attempts the adaptive concurrency limit currently lets be in flight towards the dependency.")), []string{"dependency", "limiter"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts(opts("adaptive_rejections_total",
			"Attempts refused at once by the adaptive concurrency limit, without reaching the dependency.")), []string{"dependency", "method"}),
		refusal: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("throttle_refusal_probability",
			"Probability with which the client-side throttler refuses an attempt, as of its last decision.")), []string{"dependency"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts(opts("throttled_total",
			"Attempts refused locally by the client-side throttler, without reaching the dependency.")), []string{"dependency", "method"}),
	}
	var err error
	for _, v := range []**prometheus.GaugeVec{&c.limit, &c.refusal} {
		if *v, err = register(r, *v); err != nil {
			return nil, err
		}
	}
	for _, v := range []**prometheus.CounterVec{&c.limited, &c.throttled} {
		if *v, err = register(r, *v); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// adaptiveLayers builds the adaptive layers of a client and binds them to
// its methods.
type adaptiveLayers struct {
	c        *Client
	shared   *concurrencyLimit
	throttle *clientThrottle
	mx       *adaptiveCollectors
}

// newAdaptive builds the service's shared limit and throttler, if the
// policy has them; r is the registerer, nil for none.
func (c *Client) newAdaptive(r prometheus.Registerer) (*adaptiveLayers, error) {
	p := &c.policy
	a := &adaptiveLayers{c: c}
	if !hasAdaptive(p) {
		return a, nil
	}
	if r != nil {
		var err error
		if a.mx, err = newAdaptiveCollectors(r); err != nil {
			return nil, err
		}
	}
	if p.AdaptiveLimit != nil {
		var err error
		if a.shared, err = a.limit(*p.AdaptiveLimit, p.Bulkhead, ""); err != nil {
			return nil, fmt.Errorf("resilient: policy %s: AdaptiveLimit: %w", p.Name, err)
		}
	}
	if p.ClientThrottle != nil {
		t, err := throttle.New(throttle.Policy(*p.ClientThrottle), c.base, nil)
		if err != nil {
			return nil, fmt.Errorf("resilient: policy %s: ClientThrottle: %w", p.Name, err)
		}
		a.throttle = &clientThrottle{t: t}
		if a.mx != nil {
			a.throttle.gauge = a.mx.refusal.WithLabelValues(p.Name)
			// The series exists before the first call; Add, not Set, for
			// another client of the dependency may share it, refusing.
			a.throttle.gauge.Add(0)
		}
	}
	return a, nil
}

// hasAdaptive reports whether the policy has an adaptive layer anywhere.
func hasAdaptive(p *policy.Service) bool {
	if p.AdaptiveLimit != nil || p.ClientThrottle != nil {
		return true
	}
	for i := range p.Methods {
		if p.Methods[i].AdaptiveLimit != nil {
			return true
		}
	}
	return false
}

// limit builds a limiter under the bulkhead b (nil for none) for method
// ("" for the service's).
func (a *adaptiveLayers) limit(pl policy.AdaptiveLimit, b *policy.Bulkhead, method string) (*concurrencyLimit, error) {
	p := adaptive.Policy(pl)
	if b != nil {
		p = p.WithCeiling(b.Permits)
	}
	l, err := adaptive.New(p, a.c.base)
	if err != nil {
		return nil, err
	}
	cl := &concurrencyLimit{l: l, label: scopeLabel(method)}
	if a.mx != nil {
		cl.gauge = a.mx.limit.WithLabelValues(a.c.policy.Name, cl.label)
		// A new series reads 0, which no limit is (min_limit is at least
		// 1); another client of the dependency on the same registerer may
		// share it, holding its own limit, which this one does not reset.
		if gaugeIsNew(cl.gauge) {
			cl.gauge.Set(float64(l.Limit()))
		}
	}
	return cl, nil
}

// gaugeIsNew reports whether g still reads 0, the value of a series no
// client has set yet.
func gaugeIsNew(g prometheus.Gauge) bool {
	var m dto.Metric
	return g.Write(&m) == nil && m.GetGauge().GetValue() == 0
}

// bind gives m its adaptive layers: its own limit or the service's, and
// the service's throttler. Streams take neither: a stream's lifetime says
// nothing of the dependency's latency.
func (a *adaptiveLayers) bind(m *methodState) error {
	mp := m.policy
	if mp.Kind != policy.KindUnary {
		return nil
	}
	m.concurrency, m.throttle = a.shared, a.throttle
	if mp.AdaptiveLimit != nil {
		b := mp.Bulkhead
		if b == nil {
			b = a.c.policy.Bulkhead
		}
		var err error
		if m.concurrency, err = a.limit(*mp.AdaptiveLimit, b, mp.Name); err != nil {
			return fmt.Errorf("resilient: policy %s: %s.AdaptiveLimit: %w", a.c.policy.Name, mp.Name, err)
		}
	}
	if cl := m.concurrency; cl != nil {
		m.limitClass, cl.classes = cl.classes, cl.classes+2
	}
	if a.mx != nil && (m.concurrency != nil || m.throttle != nil) {
		dep, name := a.c.policy.Name, shortName(mp.Name)
		am := &adaptiveMetrics{}
		if m.concurrency != nil {
			am.limited = a.mx.limited.WithLabelValues(dep, name)
		}
		if m.throttle != nil {
			am.throttled = a.mx.throttled.WithLabelValues(dep, name)
		}
		m.adaptiveMetrics = am
	}
	return nil
}

// gate is what the adaptive layers admitted one attempt with.
type gate struct {
	tok   adaptive.Token
	start int64 // the attempt's start, for the limit's round-trip time
	known bool  // start was read
	// allowed: the throttler let the attempt through, and is told how it
	// ended.
	allowed bool
}

// begin takes the attempt's start for the limit, if it has one: the
// reading its timeout was counted from where there is one (sp), else the
// throttler's, else a reading of its own.
func (g *gate) begin(m *methodState, sp span) {
	switch {
	case m.concurrency == nil:
	case sp.known:
		g.start, g.known = sp.start, true
	case !g.known:
		g.start, g.known = m.client.now(), true
	}
}

// enter asks the throttler, then the concurrency limit, to let one attempt
// through. It returns the refusal, an *Error matching ErrThrottled or
// ErrConcurrencyLimited, when either does not.
func (m *methodState) enter() (g gate, err error) {
	c := m.client
	n := int64(-1)
	if th := m.throttle; th != nil {
		n = c.now()
		if !th.t.AllowAt(n) {
			return g, m.throttled(th, n)
		}
		g.allowed, g.start, g.known = true, n, true
		// Admitted: the throttler's episode is over a second after its
		// last refusal, whatever the limit behind it does with the
		// attempt (its refusal is the limit's, not the throttler's).
		if th.throttling.Load() && n-th.lastRefusal.Load() >= int64(episodeQuiet) {
			th.throttling.Store(false)
		}
	}
	if cl := m.concurrency; cl != nil {
		tok, ok := cl.l.Acquire()
		if !ok {
			if n < 0 {
				n = c.now()
			} else if g.allowed {
				m.throttle.setGauge(n) // the throttler admitted it: its last decision
			}
			return g, m.concurrencyLimited(cl, n)
		}
		g.tok = tok
		if cl.limiting.Load() {
			if n < 0 {
				n = c.now()
			}
			if n-cl.lastRefusal.Load() >= int64(episodeQuiet) {
				cl.limiting.Store(false)
			}
		}
	}
	return g, nil
}

// concurrencyLimited counts and, once per episode, reports a refusal by
// the limit at n.
func (m *methodState) concurrencyLimited(cl *concurrencyLimit, n int64) error {
	limit := cl.l.Limit()
	err := concurrencyLimitedError(m.dependency(), m.policy.Name, limit)
	if am := m.adaptiveMetrics; am != nil {
		am.limited.Inc()
	}
	if ev := m.client.events; ev != nil {
		storeLater(&cl.lastRefusal, n)
		if !cl.limiting.Load() && cl.limiting.CompareAndSwap(false, true) {
			ev.emit(Event{Kind: EventConcurrencyLimited, Dependency: m.dependency(), Method: m.policy.Name,
				Cause: fmt.Sprintf("limit %d (%s)", limit, cl.label), Err: err})
		}
	}
	return err
}

// throttled counts and, once per episode, reports a refusal by the
// throttler at n.
func (m *methodState) throttled(th *clientThrottle, n int64) error {
	p := th.t.RefusalProbabilityAt(n)
	err := throttledError(m.dependency(), m.policy.Name, p)
	if am := m.adaptiveMetrics; am != nil {
		am.throttled.Inc()
	}
	if th.gauge != nil {
		th.gauge.Set(p)
	}
	if ev := m.client.events; ev != nil {
		storeLater(&th.lastRefusal, n)
		if !th.throttling.Load() && th.throttling.CompareAndSwap(false, true) {
			ev.emit(Event{Kind: EventThrottled, Dependency: m.dependency(), Method: m.policy.Name,
				Cause: fmt.Sprintf("refusal probability %.2f", p), Err: err})
		}
	}
	return err
}

// storeLater sets a to n unless it holds a later time: of two refusals
// read from the clock in one order and stored in the other, the later one
// stays, and an episode does not end a second after the earlier.
func storeLater(a *atomic.Int64, n int64) {
	for {
		old := a.Load()
		if old >= n || a.CompareAndSwap(old, n) {
			return
		}
	}
}

// leave tells the adaptive layers how an attempt they admitted with g
// ended: err is its error, ctx the call's context (outside the attempt's
// own timeout), n a clock reading the attempt took at or near its end, 0
// for none. The limit reads the clock for the round-trip time; the
// throttler, which counts in buckets of a tenth of its window, takes n.
//
//   - an answer (nil, or a code that is not an overload: NOT_FOUND, …):
//     the limit takes its round-trip time as a sample, the throttler
//     counts an accept;
//   - DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED or UNAVAILABLE while the call
//     still had time: the limit halves (once per round trip), the throttler
//     counts a request not accepted;
//   - the call's own end (its caller cancelled, its deadline passed, a
//     hedged copy lost) or a fault on the client's side: nothing is known
//     of the dependency; the limit's permit is returned, the throttler
//     counts nothing, except for the call's deadline: the dependency did
//     not answer in the time it had, a request not accepted for the
//     throttler as it is a failure for the breaker;
//   - a DEADLINE_EXCEEDED the server's Guard marked DEADLINE_TOO_SHORT (the
//     caller left less than the method's MinDeadline): nothing is known of
//     the dependency, as the breaker counts it nothing; the limit's permit
//     is returned, the throttler counts nothing. mark is what pushback
//     already read of err's refusal mark (markUnread: nothing).
func (m *methodState) leave(ctx context.Context, g gate, err error, n int64, mark refusalMark) {
	c := m.client
	o, ot := judgeAdaptive(ctx, err, mark)
	if n == 0 || m.concurrency != nil {
		n = c.now()
	}
	if cl := m.concurrency; cl != nil {
		class := m.limitClass
		if err != nil {
			class++ // an error answer's latency is not the answers' (adaptive.Limiter.ReleaseAs)
		}
		cl.l.ReleaseAs(g.tok, o, class, time.Duration(n-g.start), n)
		if cl.gauge != nil {
			cl.gauge.Set(float64(cl.l.Limit()))
		}
	}
	if th := m.throttle; th != nil && g.allowed {
		if ot != adaptive.Ignored {
			th.t.RecordAt(n, ot == adaptive.Success)
		}
		// Set for an ignored outcome too: the gauge is the probability as
		// of the throttler's last decision, which admitted this attempt,
		// and would otherwise stay at what an earlier one left (an
		// outage's 0.9 after the window forgot it).
		th.setGauge(n)
	}
}

// setGauge sets the refusal probability gauge, if any, to the throttler's
// probability at n.
func (th *clientThrottle) setGauge(n int64) {
	if th.gauge != nil {
		th.gauge.Set(th.t.RefusalProbabilityAt(n))
	}
}

// leaveRefused returns what g holds for an attempt a later layer (the
// breaker) refused: it says nothing about the dependency.
func (m *methodState) leaveRefused(g gate) {
	if cl := m.concurrency; cl != nil {
		cl.l.ReleaseAt(g.tok, adaptive.Ignored, 0, 0)
	}
	if th := m.throttle; th != nil && g.allowed && th.gauge != nil {
		th.setGauge(m.client.now()) // the throttler's decision admitted it
	}
}

// leaveUnlessDone, deferred, returns what g holds for an attempt that was
// not judged: the breaker refused it, or it panicked before its call
// returned (in the breaker's admission or in the call); the panic goes on.
func (m *methodState) leaveUnlessDone(left *bool, g gate) {
	if !*left {
		m.leaveRefused(g)
	}
}

// overloadCodes are the codes that tell the adaptive layers the dependency
// did not serve the attempt (contract.OverloadCodes).
var overloadCodes = policy.CodesOf(contract.OverloadCodes...)

// judgeAdaptive is what an attempt's end tells the adaptive layers (see
// leave): limit is the concurrency limit's outcome, throttle the
// throttler's. The call's deadline counts as passed once its time is up,
// whether or not its context is yet marked done: gRPC reports
// DEADLINE_EXCEEDED a little before the context's timer fires, and an
// attempt judged in that moment must not be taken for a drop by chance.
//
// A DEADLINE_EXCEEDED that the server's Guard refused at its door as too
// short (refusalMarked, markShortDeadline) is the caller's time, not the
// dependency's load: counted, one caller's tight deadlines would halve the
// limit and throttle the calls of every other caller of the client, as
// the breaker, which counts it nothing, would otherwise be opened. Only a
// DEADLINE_EXCEEDED while the call had time pays for the look at its
// details (none when pushback already read them: mark).
func judgeAdaptive(ctx context.Context, err error, mark refusalMark) (limit, throttle adaptive.Outcome) {
	if err == nil {
		return adaptive.Success, adaptive.Success
	}
	if _, local := err.(*clientFault); local {
		return adaptive.Ignored, adaptive.Ignored
	}
	st, code := statusOf(err)
	over := overloadCodes.Has(code)
	switch cerr := ctx.Err(); {
	case errors.Is(cerr, context.Canceled):
		return adaptive.Ignored, adaptive.Ignored
	case code == codes.DeadlineExceeded && st != nil && mark != markAbsent && refusalMarked(st, mark):
		return adaptive.Ignored, adaptive.Ignored // the Guard's "too short": the caller's time
	case cerr != nil || code == codes.DeadlineExceeded && ownTimeout(ctx):
		if over {
			return adaptive.Ignored, adaptive.Dropped
		}
		return adaptive.Ignored, adaptive.Success
	case code == codes.Unavailable && (st == nil || !refusalMarked(st, mark)):
		// Down or failing, not overloaded: with every such answer a drop,
		// a dependency that fails a share of its calls at once had the
		// limit halved again and again (1 call in 20 held it near 4 of
		// 16, a third of the static bulkhead's answers,
		// TestAttack27IAFewInstantFailuresCollapseTheLimit). A failing
		// dependency is the breaker's to judge; the limit takes the
		// overload's own words: its attempts' timeouts,
		// RESOURCE_EXHAUSTED, and an UNAVAILABLE that a Guard marked
		// shed. The throttler counts it a request not accepted.
		return adaptive.Ignored, adaptive.Dropped
	case over:
		return adaptive.Dropped, adaptive.Dropped
	}
	return adaptive.Success, adaptive.Success
}

// withCause gives a refusal the last real error of the call, if any.
func withCause(refusal, last error) error {
	if e, ok := refusal.(*Error); ok && last != nil {
		e.Cause = last
	}
	return refusal
}
