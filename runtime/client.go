package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

// Client holds the state a generated client shares between its methods:
// the circuit breakers, the bulkheads and the retry budget of one
// dependency. Each generated client has its own; it is safe for concurrent
// use.
type Client struct {
	policy  policy.Service
	clock   Clock
	system  bool // clock is the system clock: read only its monotonic part
	base    time.Time
	budget  *budget
	methods []*methodState
	byName  map[string]*methodState
	changes []Change // what the edits changed, in order

	metrics *collectors // nil without a registerer
	events  *events     // nil without a logger or an observer
}

// methodState is the compiled, ready-to-run policy of one method of a
// Client, with the state it goes through: its breaker, bulkhead, budget,
// rate limit, cache and metrics.
type methodState struct {
	client   *Client
	policy   *policy.Method
	breaker  *breaker     // the method's own, or the service's; nil for none
	bulkhead *bulkhead    // likewise
	budget   *budget      // nil unless the method retries or hedges
	limiter  *rateLimiter // the method's own, or the service's; nil for none
	cache    *cache       // nil unless the method has a cache

	concurrency     *concurrencyLimit // the method's own adaptive limit, or the service's; nil for none
	limitClass      int               // the latency class of the method's answers in concurrency (bind)
	throttle        *clientThrottle   // the service's throttler; nil for none
	adaptiveMetrics *adaptiveMetrics  // nil without a registerer or adaptive layers

	metrics *methodMetrics // nil without a registerer
	hot     hotPath        // what the hot path asks of the above, derived once
	// fallbackSeen has bit i set once a fallback for cause i was reported
	// since the method last succeeded: one event per episode and cause.
	fallbackSeen atomic.Uint32
}

// Option configures a Client.
type Option func(*options)

type options struct {
	clock      Clock
	logger     *slog.Logger
	registerer prometheus.Registerer
	// clockGiven, registererGiven, loggerGiven: WithClock, WithRegisterer,
	// WithLogger were used, so that a nil given to them is refused rather
	// than read as "none".
	clockGiven, registererGiven, loggerGiven bool
	observers                                []func(Event)
	edits                                    []policyEdit
}

// policyEdit is one change of the policy and who asked for it.
type policyEdit struct {
	source string
	apply  func(*policy.Service)
	// recorded applies an edit that keeps its own record of what it
	// changed (WithRecordedPolicy); nil for a plain edit, whose changes
	// are found by comparing the policy before and after it.
	recorded func(*policy.Service) ([]Change, error)
}

// WithPolicy edits the policy before the client is built: edit receives a
// deep copy of the annotated policy (the generated literal is never
// changed), and the result is validated like the annotations. Several edits
// apply in order. It is how a program applies operator overrides or runs
// the same client under another policy, as the cascade demonstration does.
// What it changes is listed by Client.Changes as coming from "WithPolicy".
func WithPolicy(edit func(p *policy.Service)) Option {
	return WithPolicyFrom("WithPolicy", edit)
}

// WithPolicyFrom is WithPolicy with the name of where the edit comes from
// ("overrides.yaml: services.\"pkg.Svc\".methods.Get.timeout"), which
// Client.Changes and Client.Describe show beside each value it changed.
func WithPolicyFrom(source string, edit func(p *policy.Service)) Option {
	return func(o *options) { o.edits = append(o.edits, policyEdit{source: source, apply: edit}) }
}

// WithRecordedPolicy is WithPolicy for an edit that keeps its own record
// of what it changed, as override does: edit changes p and returns one
// Change per value it set, with the value before the edit as Annotated,
// the value after it as Value, and the key it came from as Source.
// Client.Changes and Client.Describe list that record as given (merged
// with the other edits' by Key), where for WithPolicy and WithPolicyFrom
// they compare the policy before and after the edit. An edit that cannot
// apply to p (overrides of another service, a value whose group an
// earlier edit took away) returns an error, and NewClient fails with it.
func WithRecordedPolicy(edit func(p *policy.Service) ([]Change, error)) Option {
	return func(o *options) {
		o.edits = append(o.edits, policyEdit{source: "WithRecordedPolicy", recorded: edit})
	}
}

// WithClock sets the clock of the breakers and the retry budget (default:
// the system clock). Tests use it to drive the cool-down and the windows.
// A nil clock, or a typed nil, is refused by NewClient.
func WithClock(c Clock) Option { return func(o *options) { o.clock, o.clockGiven = c, true } }

// WithLogger sets the logger that receives the runtime's events (default:
// none, nothing is logged): breaker transitions (warn when one opens, info
// otherwise), the retry budget's exhaustion and fallbacks (warn), each once
// per occurrence, never once per call. See EventKind. A nil logger is
// refused by NewClient (as WithObserver(nil) is): leave the option out to
// log nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger, o.loggerGiven = l, true }
}

// NewClient builds the shared state for the service described by p. It
// checks the policy and refuses one that cannot be applied, naming the
// field. p is copied: later changes to it have no effect.
func NewClient(p *policy.Service, opts ...Option) (*Client, error) {
	if p == nil {
		return nil, errors.New("resilient: NewClient: nil policy")
	}
	var o options
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("resilient: NewClient(%s): option %d is nil", p.Name, i)
		}
		opt(&o)
	}
	if o.clockGiven && nilIn(o.clock) != "" {
		return nil, fmt.Errorf("resilient: NewClient(%s): WithClock(nil): pass a Clock, or leave the option out for the system clock", p.Name)
	}
	if o.loggerGiven && o.logger == nil {
		return nil, fmt.Errorf("resilient: NewClient(%s): WithLogger(nil): pass a *slog.Logger, or leave the option out to log nothing", p.Name)
	}
	if o.registererGiven && nilIn(o.registerer) != "" {
		return nil, fmt.Errorf("resilient: NewClient(%s): WithRegisterer(nil): pass a prometheus.Registerer, or leave the option out for no metrics", p.Name)
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
	_, system := o.clock.(realClock)
	c := &Client{policy: p.Clone(), clock: o.clock, system: system, base: o.clock.Now()}
	for _, e := range o.edits {
		if e.apply == nil && e.recorded == nil {
			return nil, fmt.Errorf("resilient: NewClient(%s): %s(nil)", p.Name, editName(e.source))
		}
		// Each edit gets a copy of its own, and the client keeps a copy of
		// what it left: an edit that keeps its pointer and writes through
		// it later reaches nothing the client uses. And an edit may leave
		// two methods pointing at one value (p.Methods[3].Retry =
		// p.Methods[0].Retry): each gets its own copy, so that a later
		// edit of one never changes the other.
		work := c.policy.Clone()
		var err error
		if c.changes, err = applyEdit(&work, e, c.changes); err != nil {
			return nil, fmt.Errorf("resilient: NewClient(%s): %s: %w", p.Name, editName(e.source), err)
		}
		c.policy = work.Clone()
		if err := sameMethods(p, &c.policy, e.source); err != nil {
			return nil, err
		}
	}
	if err := c.policy.Validate(); err != nil {
		return nil, err
	}
	if len(c.changes) > 0 {
		c.changes = changesInForce(p, &c.policy, c.changes)
	}
	for i, obs := range o.observers {
		if obs == nil {
			return nil, fmt.Errorf("resilient: NewClient(%s): WithObserver(nil) (observer %d)", p.Name, i)
		}
	}
	c.events = newEvents(o.logger, o.observers)
	if o.registerer != nil {
		var err error
		if c.metrics, err = newCollectors(o.registerer); err != nil {
			return nil, err
		}
	}
	p = &c.policy
	c.byName = make(map[string]*methodState, len(p.Methods))

	var shared *breaker
	if p.Breaker != nil {
		shared = c.newBreaker(*p.Breaker, "")
	}
	var sharedBulkhead *bulkhead
	if p.Bulkhead != nil {
		sharedBulkhead = newBulkhead(*p.Bulkhead)
	}
	var sharedLimiter *rateLimiter
	if p.RateLimit != nil {
		sharedLimiter = newRateLimiter(*p.RateLimit)
	}
	layers, err := c.newAdaptive(o.registerer)
	if err != nil {
		return nil, err
	}
	for i := range c.policy.Methods {
		mp := &c.policy.Methods[i]
		m := &methodState{client: c, policy: mp, breaker: shared, bulkhead: sharedBulkhead, limiter: sharedLimiter}
		if mp.RateLimit != nil {
			m.limiter = newRateLimiter(*mp.RateLimit)
		}
		if mp.Cache != nil {
			m.cache = newCache(*mp.Cache)
		}
		if mp.Breaker != nil {
			m.breaker = c.newBreaker(*mp.Breaker, mp.Name)
		}
		if mp.Bulkhead != nil {
			m.bulkhead = newBulkhead(*mp.Bulkhead)
		}
		if (mp.Retry != nil && mp.Retry.MaxAttempts > 1) || mp.Hedging != nil {
			if c.budget == nil {
				c.budget = newBudget(*p.BudgetInForce(), c.base)
			}
			m.budget = c.budget
		}
		if err := layers.bind(m); err != nil {
			return nil, err
		}
		if c.metrics != nil {
			m.metrics = c.metrics.forMethod(p.Name, m)
		}
		m.hot = deriveHot(m)
		c.methods = append(c.methods, m)
		c.byName[mp.Name] = m
	}
	return c, nil
}

// newBreaker builds a breaker whose transitions are counted, logged and
// observed; method is "" for the service's shared breaker.
func (c *Client) newBreaker(p policy.Breaker, method string) *breaker {
	dep := c.policy.Name
	var state prometheus.Gauge
	var entered [3]prometheus.Counter
	if c.metrics != nil {
		label := scopeLabel(method)
		state = c.metrics.breakerState.WithLabelValues(dep, label)
		// Closed (0) for a new series; a series another client of the
		// dependency shares on this registerer keeps its last transition
		// (an open breaker is not reported closed by a client built later).
		state.Add(float64(StateClosed))
		for s := range entered {
			entered[s] = c.metrics.breakerTransitions.WithLabelValues(dep, label, State(s).String())
		}
	}
	ev := c.events
	if state == nil && ev == nil {
		return newBreaker(p, c.base, nil)
	}
	// The transitions' calls come after the breaker's lock is released, so
	// two of them in a row may come in the other order: each sets the
	// gauge to the state the breaker is in when it does, under a lock of
	// the gauge's, so that the last to set it leaves the breaker's state
	// (not the state the earlier transition entered).
	var gauge sync.Mutex
	var b *breaker
	b = newBreaker(p, c.base, func(from, to State) {
		if state != nil {
			gauge.Lock()
			state.Set(float64(b.state.Load()))
			gauge.Unlock()
			entered[to].Inc()
		}
		if ev != nil {
			ev.emit(Event{Kind: EventBreakerTransition, Dependency: dep, Method: method, From: from, To: to, Cause: transitionCause(from, to)})
		}
	})
	return b
}

// Policy returns a deep copy of the policy the client applies: changing
// it changes nothing the client does (the client's policy is fixed when
// it is built; edit it with WithPolicy or an override). It is nil for a
// nil Client, the Runtime() of a generated client never built.
func (c *Client) Policy() *policy.Service {
	if c == nil {
		return nil
	}
	p := c.policy.Clone()
	return &p
}

// BreakerState returns the state of the breaker the named method
// ("/pkg.Service/Method") goes through, and false when it has none (or
// c is nil, the Runtime() of a generated client never built).
func (c *Client) BreakerState(method string) (State, bool) {
	if c == nil {
		return StateClosed, false
	}
	m := c.byName[method]
	if m == nil || m.breaker == nil {
		return StateClosed, false
	}
	return m.breaker.stateAt(c.now()), true
}

// BulkheadInUse returns the permits taken in the bulkhead the named method
// goes through, and false when it has none (or c is nil, as BreakerState).
func (c *Client) BulkheadInUse(method string) (int, bool) {
	if c == nil {
		return 0, false
	}
	m := c.byName[method]
	if m == nil || m.bulkhead == nil {
		return 0, false
	}
	return m.bulkhead.taken(), true
}

func (m *methodState) dependency() string { return m.client.policy.Name }

// nilRequestError is the error for a call or stream given a nil request
// (INVALID_ARGUMENT, naming the method): nothing is sent, because gRPC
// would send an empty message, which is never what the caller meant.
func nilRequestError(method string) error {
	return misuseError(codes.InvalidArgument, method, "nil request")
}

// nilContextError is returned for a call or a stream given a nil context.
func nilContextError(method string) error {
	return misuseError(codes.InvalidArgument, method, "nil context")
}

// NilConnError is the error a generated constructor returns when given a
// nil connection (INVALID_ARGUMENT, naming the service).
func NilConnError(service string) error {
	return misuseError(codes.InvalidArgument, "", "NewClient for "+service+": nil grpc.ClientConnInterface: pass the connection from grpc.NewClient")
}

// now returns the time as nanoseconds since the client was built. With the
// system clock it reads only the monotonic clock, which costs half as much
// as time.Now.
func (c *Client) now() int64 {
	if c.system {
		return int64(time.Since(c.base))
	}
	return nanos(c.clock.Now(), c.base)
}
