package runtime

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/codename"
)

// WithRegisterer makes the client count what it does in Prometheus metrics
// registered on r (default: none, and the calls pay nothing for metrics).
// The metrics, their labels and example alerts are listed in the README
// ("Observability"). Several clients may register on the same r, even for
// the same dependency: the second finds the first's collectors and shares
// them. A nil r, or a typed nil, is refused by NewClient.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(o *options) { o.registerer, o.registererGiven = r, true }
}

// attemptBuckets are the bounds, in seconds, of the attempt duration
// histogram: from 1 ms (a cache next door) to 30 s (a stream's first
// message, a batch call), about three per decade.
var attemptBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// The retry outcomes of resilient_client_retries_total.
const (
	retryMade          = iota // the retry attempt went to the dependency
	retryBudget               // refused by the retry budget
	retryDeadline             // the wait would have ended past the deadline
	retryBreaker              // refused by the open circuit breaker
	retryPushback             // the server said not to retry (negative pushback)
	retryHedge                // a hedged copy went to the dependency
	retryThrottler            // refused by the client-side throttler
	retryAdaptiveLimit        // refused by the adaptive concurrency limit
	numRetryOutcomes
)

var retryOutcomes = [numRetryOutcomes]string{"made", "budget", "deadline", "breaker", "pushback", "hedge", "throttler", "adaptive_limit"}

// collectors are the metric families of one Registerer.
type collectors struct {
	attempts           *prometheus.CounterVec   // dependency, method, code
	attemptDuration    *prometheus.HistogramVec // dependency, method
	retries            *prometheus.CounterVec   // dependency, method, outcome
	breakerState       *prometheus.GaugeVec     // dependency, breaker
	breakerTransitions *prometheus.CounterVec   // dependency, breaker, state
	breakerRejections  *prometheus.CounterVec   // dependency, method
	bulkheadInUse      *prometheus.GaugeVec     // dependency, bulkhead
	bulkheadRejections *prometheus.CounterVec   // dependency, method
	fallbacks          *prometheus.CounterVec   // dependency, method, cause
	rateLimited        *prometheus.CounterVec   // dependency, method
	cacheLookups       *prometheus.CounterVec   // dependency, method, result
}

func newCollectors(r prometheus.Registerer) (*collectors, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "resilient", Subsystem: "client", Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "resilient", Subsystem: "client", Name: name, Help: help}, labels)
	}
	c := &collectors{
		attempts: counter("attempts_total", "Attempts admitted by every layer and handed to gRPC, by the status code they ended with.", "dependency", "method", "code"),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "resilient", Subsystem: "client",
			Name: "attempt_duration_seconds", Help: "Duration of one attempt, from sending to the answer (a stream: to its first message or its end).",
			Buckets: attemptBuckets}, []string{"dependency", "method"}),
		retries:            counter("retries_total", "Retries made, hedged copies sent (hedge), and retries or copies not made: refused by the retry budget, the deadline, the circuit breaker, the server's pushback, the client-side throttler or the adaptive concurrency limit.", "dependency", "method", "outcome"),
		breakerState:       gauge("breaker_state", "State of the circuit breaker as of its last transition: 0 closed, 1 half-open, 2 open.", "dependency", "breaker"),
		breakerTransitions: counter("breaker_transitions_total", "Transitions of the circuit breaker, by the state entered.", "dependency", "breaker", "state"),
		breakerRejections:  counter("breaker_rejections_total", "Calls refused by the circuit breaker without reaching the dependency.", "dependency", "method"),
		bulkheadInUse:      gauge("bulkhead_in_use", "Permits of the bulkhead taken by calls in flight.", "dependency", "bulkhead"),
		bulkheadRejections: counter("bulkhead_rejections_total", "Calls refused because every permit of the bulkhead was taken.", "dependency", "method"),
		fallbacks:          counter("fallbacks_total", "Calls answered by the method's fallback, or by a stale cached answer (cause stale_cache), by the cause of the failure.", "dependency", "method", "cause"),
		rateLimited:        counter("rate_limited_total", "Calls refused by the client's own rate limit towards the dependency.", "dependency", "method"),
		cacheLookups:       counter("cache_lookups_total", "Calls of a cached method by result: hit (a fresh answer, no call), miss (a call made or joined), stale (a stale answer after the call failed).", "dependency", "method", "result"),
	}
	var err error
	if c.attempts, err = register(r, c.attempts); err != nil {
		return nil, err
	}
	if c.attemptDuration, err = register(r, c.attemptDuration); err != nil {
		return nil, err
	}
	for _, v := range []**prometheus.CounterVec{&c.retries, &c.breakerTransitions, &c.breakerRejections, &c.bulkheadRejections, &c.fallbacks, &c.rateLimited, &c.cacheLookups} {
		if *v, err = register(r, *v); err != nil {
			return nil, err
		}
	}
	for _, v := range []**prometheus.GaugeVec{&c.breakerState, &c.bulkheadInUse} {
		if *v, err = register(r, *v); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// register registers c on r, or returns the collector already registered
// under the same description, so that several clients share one family.
func register[C prometheus.Collector](r prometheus.Registerer, c C) (C, error) {
	err := r.Register(c)
	if err == nil {
		return c, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("resilient: WithRegisterer: %w; another collector holds a resilient_client_ metric name with other labels or help: register it elsewhere or use another Registerer", err)
}

// shortName is the method's name without its service: "GetStock".
func shortName(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}

// numCodes is the number of canonical gRPC codes; an attempt that ends
// with a code beyond them (gRPC passes any number a server sends) is
// counted under UNKNOWN, as its fallback is: a dependency cannot grow the
// series without bound.
const numCodes = int(codes.Unauthenticated) + 1

// The fallback causes other than a status code.
const (
	causeCircuitOpen = iota
	causeBulkheadFull
	causeBudgetExhausted
	causeRateLimited
	causeStaleCache // a stale cached answer, not the fallback
	causeConcurrencyLimited
	causeThrottled
	causeCode // + the code
	numCauses = causeCode + numCodes
)

// causeName is the cause label of a fallback or an event: "circuit_open",
// "bulkhead_full", "budget_exhausted", or the lower-case name of the code
// ("deadline_exceeded", "unavailable").
func causeName(i int) string {
	switch i {
	case causeCircuitOpen:
		return "circuit_open"
	case causeBulkheadFull:
		return "bulkhead_full"
	case causeBudgetExhausted:
		return "budget_exhausted"
	case causeRateLimited:
		return "rate_limited"
	case causeStaleCache:
		return "stale_cache"
	case causeConcurrencyLimited:
		return "concurrency_limited"
	case causeThrottled:
		return "throttled"
	}
	return strings.ToLower(codename.Of(codes.Code(i - causeCode)))
}

// causeOf classifies the error a fallback was given.
func causeOf(err error, code codes.Code) int {
	switch {
	case errors.Is(err, ErrCircuitOpen):
		return causeCircuitOpen
	case errors.Is(err, ErrBulkheadFull):
		return causeBulkheadFull
	case errors.Is(err, ErrBudgetExhausted):
		return causeBudgetExhausted
	case errors.Is(err, ErrRateLimited):
		return causeRateLimited
	case errors.Is(err, ErrConcurrencyLimited):
		return causeConcurrencyLimited
	case errors.Is(err, ErrThrottled):
		return causeThrottled
	case int(code) < numCodes:
		return causeCode + int(code)
	}
	return causeCode + int(codes.Unknown)
}

// lazyCounters holds the children of a counter family for one method, one
// per value of its last label, made at their first use so that the
// exposition does not list a series for every code that never happened.
type lazyCounters struct {
	vec      *prometheus.CounterVec
	dep, met string
	name     func(int) string
	other    int // the value counted for one beyond the children (UNKNOWN's)
	children []atomic.Pointer[counterBox]
}

type counterBox struct{ prometheus.Counter }

// methodMetrics are the metrics of one method, resolved when the client is
// built: a call touches no map and looks up no label, except the first time
// a code or cause occurs.
type methodMetrics struct {
	attempts           lazyCounters
	duration           prometheus.Observer
	retries            [numRetryOutcomes]prometheus.Counter
	breakerRejections  prometheus.Counter
	bulkheadRejections prometheus.Counter
	bulkheadInUse      prometheus.Gauge // nil without a bulkhead
	fallbacks          lazyCounters
	rateLimited        prometheus.Counter                  // nil without a rate limit
	cache              [numCacheResults]prometheus.Counter // nil without a cache
}

// The results of a lookup in a method's cache.
const (
	cacheHit = iota
	cacheMiss
	cacheStale
	numCacheResults
)

var cacheResults = [numCacheResults]string{"hit", "miss", "stale"}

// cacheLookup counts a lookup in the method's cache, if metrics are kept.
func (m *methodState) cacheLookup(result int) {
	if mx := m.metrics; mx != nil {
		mx.cache[result].Inc()
	}
}

func newLazy(vec *prometheus.CounterVec, dep, method string, n, other int, name func(int) string) lazyCounters {
	return lazyCounters{vec: vec, dep: dep, met: method, name: name, other: other, children: make([]atomic.Pointer[counterBox], n)}
}

// get returns the child for label value i, making it on first use. A
// value beyond the children (a code past the canonical ones: gRPC passes
// any number a server sends) is counted under other, so that a dependency
// cannot grow the series without bound.
func (l *lazyCounters) get(i int) prometheus.Counter {
	if i < 0 || i >= len(l.children) {
		i = l.other
	}
	if b := l.children[i].Load(); b != nil {
		return b.Counter
	}
	b := &counterBox{l.vec.WithLabelValues(l.dep, l.met, l.name(i))}
	l.children[i].Store(b) // a race makes the same child twice: harmless
	return b.Counter
}

func codeLabel(i int) string { return codename.Of(codes.Code(i)) }

func (cs *collectors) forMethod(dep string, m *methodState) *methodMetrics {
	name := shortName(m.policy.Name)
	mm := &methodMetrics{
		attempts:           newLazy(cs.attempts, dep, name, numCodes, int(codes.Unknown), codeLabel),
		duration:           cs.attemptDuration.WithLabelValues(dep, name),
		breakerRejections:  cs.breakerRejections.WithLabelValues(dep, name),
		bulkheadRejections: cs.bulkheadRejections.WithLabelValues(dep, name),
		fallbacks:          newLazy(cs.fallbacks, dep, name, numCauses, causeCode+int(codes.Unknown), causeName),
	}
	for i := range mm.retries {
		mm.retries[i] = cs.retries.WithLabelValues(dep, name, retryOutcomes[i])
	}
	if m.bulkhead != nil {
		label := scopeLabel("") // the service's bulkhead, or the method's own
		if m.policy.Bulkhead != nil {
			label = scopeLabel(m.policy.Name)
		}
		mm.bulkheadInUse = cs.bulkheadInUse.WithLabelValues(dep, label)
		// The series exists before the first call. Add, not Set: another
		// client of the dependency on the same registerer may share it,
		// with calls in flight that its Dec will count out.
		mm.bulkheadInUse.Add(0)
	}
	if m.limiter != nil {
		mm.rateLimited = cs.rateLimited.WithLabelValues(dep, name)
	}
	if m.cache != nil {
		for i := range mm.cache {
			mm.cache[i] = cs.cacheLookups.WithLabelValues(dep, name, cacheResults[i])
		}
	}
	return mm
}

// attempt counts one attempt that ended with code after d nanoseconds.
func (mm *methodMetrics) attempt(code codes.Code, d int64) {
	mm.attempts.get(int(code)).Inc()
	mm.duration.Observe(float64(d) / 1e9)
}

// scopeLabel is the value of the breaker and bulkhead labels in metrics and
// logs, saying whose breaker or bulkhead it is: "shared" for the
// service's, the method's name for a method's own. A method whose name is
// "shared" itself (legal in a .proto) is labelled by its full name
// ("/pkg.Service/shared"), so that its series is never the service's.
func scopeLabel(method string) string {
	if method == "" {
		return sharedScope
	}
	if name := shortName(method); name != sharedScope {
		return name
	}
	return method
}

// sharedScope labels the service's own breaker and bulkhead.
const sharedScope = "shared"
