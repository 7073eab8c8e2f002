package runtime

import (
	"context"
	"log/slog"
)

// EventKind is what an Event reports.
type EventKind uint8

// The kinds of event. Each is reported once per occurrence, never once per
// call: a transition once; the budget's exhaustion once when it begins
// (its first refusal) and once when it ends (the first call of a method
// that retries or hedges after a whole budget window without a refusal); a fallback when a method first
// answers by it for a cause since the method last succeeded.
const (
	// EventBreakerTransition: a circuit breaker changed state (From, To).
	EventBreakerTransition EventKind = iota + 1
	// EventBudgetExhausted: the retry budget refused a retry, the first
	// refusal of an episode.
	EventBudgetExhausted
	// EventFallback: a method's fallback answered a failed call.
	EventFallback
	// EventBudgetRecovered: the retry budget refused no retry for a whole
	// window: the episode begun by EventBudgetExhausted is over.
	EventBudgetRecovered
	// EventConcurrencyLimited: the adaptive concurrency limit refused an
	// attempt, the first refusal of an episode (one that begins after a
	// second without a refusal).
	EventConcurrencyLimited
	// EventThrottled: the client-side throttler refused an attempt, the
	// first refusal of an episode (likewise).
	EventThrottled
)

func (k EventKind) String() string {
	switch k {
	case EventBreakerTransition:
		return "breaker transition"
	case EventBudgetExhausted:
		return "budget exhausted"
	case EventFallback:
		return "fallback"
	case EventBudgetRecovered:
		return "budget recovered"
	case EventConcurrencyLimited:
		return "concurrency limited"
	case EventThrottled:
		return "throttled"
	}
	return "unknown"
}

// Event is one decision of the runtime that an operator should see.
type Event struct {
	Kind EventKind
	// Dependency is the full name of the service called.
	Dependency string
	// Method is the full method name ("/pkg.Service/Method"): the method
	// whose call was refused or answered by the fallback, or whose own
	// breaker changed state; empty for the service's shared breaker. The
	// logger writes it as the metrics' method label does, without the
	// service ("GetStock"), beside dependency.
	Method string
	// From and To are the states of a breaker transition.
	From, To State
	// Cause says why: for a transition, what made it ("failure ratio
	// reached"); for a fallback, what failed ("circuit_open",
	// "bulkhead_full", "budget_exhausted", "deadline_exceeded", …); for the
	// budget, the code of the error the refused retry leaves the caller
	// with, empty for a hedged copy refused while no copy has failed (the
	// call goes on with the copies in flight, and may yet succeed).
	Cause string
	// Err is the error a fallback answered or the budget left the caller
	// with; nil for a transition, and for a hedged copy refused while no
	// copy has failed.
	Err error
}

// WithObserver adds an observer of the runtime's events (default: none),
// for tests or to forward them to a tracing or event system such as
// OpenTelemetry. observe is called synchronously on the goroutine of the
// call that caused the event, outside any lock of the runtime; it must be
// quick and safe for concurrent use. A panic in it goes on to that
// caller. For a stream whose context ends, the caller is the stream's call
// in progress then (a Recv waiting on the server); with none in progress,
// the stream is ended on a goroutine of the runtime, and a panic there
// ends the program. The logger set with WithLogger receives the same
// events, before the observers; a panic in one of them (the logger's
// handler included) takes an event from none of the others.
func WithObserver(observe func(Event)) Option {
	return func(o *options) { o.observers = append(o.observers, observe) }
}

// events sends the runtime's events to the logger and the observers. A
// client without either has none, and the calls pay one nil check.
type events struct {
	logger *slog.Logger
	sinks  []func(Event) // the logger's (when set), then the observers
}

func newEvents(l *slog.Logger, obs []func(Event)) *events {
	if l == nil && len(obs) == 0 {
		return nil
	}
	ev := &events{logger: l}
	if l != nil {
		ev.sinks = append(ev.sinks, ev.log)
	}
	ev.sinks = append(ev.sinks, obs...)
	return ev
}

// emit reports e to the logger, then to each observer. An event is
// reported once per episode, so a panic in one of them (which goes on to
// the caller) must not take it from the others after it.
func (ev *events) emit(e Event) {
	emitAll(ev.sinks, e)
}

// emitAll calls each sink with e; when one panics, or ends its goroutine
// (runtime.Goexit, as t.FailNow), the others after it still receive e,
// and the first panic goes on (a later one's is dropped; with none, the
// Goexit goes on): TestAttack27GTwoPanickingObserversTheFirstPanicGoesOn,
// TestAttack27GGoexitInAnObserverTakesTheEventFromNone.
func emitAll(sinks []func(Event), e Event) {
	for i, sink := range sinks {
		if i == len(sinks)-1 {
			sink(e) // the last: a panic goes on as it is
			return
		}
		func() {
			returned := false
			defer func() {
				if returned {
					return
				}
				r := recover() // nil for a Goexit, which goes on once this returns
				func() {
					if r != nil {
						defer func() { _ = recover() }() // the first panic goes on
					}
					emitAll(sinks[i+1:], e)
				}()
				if r != nil {
					panic(r)
				}
			}()
			sink(e)
			returned = true
		}()
	}
}

// log writes e to the logger.
func (ev *events) log(e Event) {
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("dependency", e.Dependency))
	if e.Method != "" {
		// The form of the metrics' method label, so that a log line and
		// its series are found by the same (dependency, method).
		attrs = append(attrs, slog.String("method", shortName(e.Method)))
	}
	level, msg := slog.LevelWarn, ""
	switch e.Kind {
	case EventBreakerTransition:
		if e.To != StateOpen {
			level = slog.LevelInfo
		}
		msg = "circuit breaker " + e.To.String()
		if e.Method == "" {
			attrs = append(attrs, slog.String("breaker", scopeLabel("")))
		}
		attrs = append(attrs, slog.String("from", e.From.String()), slog.String("to", e.To.String()))
	case EventBudgetExhausted:
		msg = "retry budget exhausted: retries refused until the window holds fewer"
	case EventBudgetRecovered:
		level, msg = slog.LevelInfo, "retry budget available again"
	case EventFallback:
		msg = "fallback answering instead of the dependency"
	case EventConcurrencyLimited:
		msg = "adaptive concurrency limit reached: attempts above it refused at once"
	case EventThrottled:
		msg = "throttling: the dependency refuses most requests, some are refused locally"
	}
	attrs = append(attrs, slog.String("cause", e.Cause))
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	ev.logger.LogAttrs(context.Background(), level, msg, attrs...)
}

// transitionCause says what makes a breaker go from one state to another.
func transitionCause(from, to State) string {
	switch {
	case from == StateClosed && to == StateOpen:
		return "failure ratio reached over the window"
	case from == StateHalfOpen && to == StateOpen:
		return "a half-open probe failed"
	case to == StateHalfOpen:
		return "cool-down elapsed"
	case to == StateClosed:
		return "every half-open probe succeeded"
	}
	return ""
}
