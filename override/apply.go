package override

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/rules"
	"github.com/go-resilient/resilient/runtime"
)

// check applies to each overridden policy the rules the plugin applies to
// each annotation (internal/rules), naming the key of each problem and
// setting aside the leaf at fault, so that apply meets only values that
// are right on their own and every problem is reported at once.
func (t *service) check(errs *problems) {
	for _, method := range slices.Sorted(maps.Keys(t.values)) {
		rules.Check(t.values[method], method != "", func(path, format string, args ...any) {
			errs.add(t.key(method, path), format, args...)
			if l := t.leafAt(method, path); l != nil {
				l.bad = true
			}
		})
	}
}

// leafAt returns the leaf of method that set path
// ("retry.retryable_codes[1]", "retry_budget") or a field under it.
func (t *service) leafAt(method, path string) *leaf {
	field, _, _ := strings.Cut(path, "[")
	for _, l := range t.leaves {
		if l.method == method && (l.path == field || strings.HasPrefix(l.path, field+".")) {
			return l
		}
	}
	return nil
}

// key names the key of path ("retry.max_attempts", "retry.retryable_codes[1]",
// "retry_budget") in the overrides of method, from the leaf that set it or
// one of its fields.
func (t *service) key(method, path string) string {
	field, index, _ := strings.Cut(path, "[")
	if index != "" {
		index = "[" + index
	}
	if l := t.leafAt(method, path); l != nil {
		return l.keyFor(field) + index
	}
	return t.name + ": " + path
}

// find returns the leaf that set path, or a field under it, last among
// those that concern method (its own and the service's, in the order they
// apply); nil for none.
func (t *service) find(method, path string) *leaf {
	ordered := t.ordered()
	for i := len(ordered) - 1; i >= 0; i-- {
		l := ordered[i]
		if (l.method == method || l.method == "") && (l.path == path || strings.HasPrefix(l.path, path+".")) {
			return l
		}
	}
	return nil
}

// ordered returns the leaves in the order they apply (the README's table
// of precedence): source first, the file's before the variables'; then
// level, within one source the service's before each method's, in the
// order of the policy, a method's per_method before its other values. So
// a variable wins over the file whatever the level of either, and within
// one source a method's value wins over its service's.
func (t *service) ordered() []*leaf {
	var out []*leaf
	for _, env := range []bool{false, true} {
		for _, l := range t.leaves {
			if l.env == env && l.method == "" {
				out = append(out, l)
			}
		}
		for i := range t.policy.Methods {
			name := methodName(t.policy.Methods[i].Name)
			for pass := range 2 {
				for _, l := range t.leaves {
					if l.env == env && l.method == name && strings.HasSuffix(l.path, ".per_method") == (pass == 0) {
						out = append(out, l)
					}
				}
			}
		}
	}
	return out
}

// apply applies every override to p, a copy of the annotated policy, and
// checks the result: what involves several values (retries on a method
// that may not be repeated, a timeout longer than the overall one, a
// backoff range upside down) is refused naming the key that made it so.
func (t *service) apply(p runtime.ServicePolicy) (*runtime.ServicePolicy, error) {
	var errs problems
	for _, l := range t.ordered() {
		if l.bad {
			continue // refused on its own (check)
		}
		if err := t.applyLeaf(&p, l); err != nil {
			errs.add(l.source, "%v", err)
			l.bad = true
		}
	}
	bulkhead := func(method string, b *runtime.BulkheadPolicy) {
		if b != nil && b.Permits == 0 {
			if l := t.find(method, "bulkhead"); l != nil {
				errs.add(l.keyFor("bulkhead.permits"), "is required: the annotation has no bulkhead here, and an override that adds one must set the number of calls allowed in flight at once, as in bulkhead: {permits: 16}")
			}
		}
	}
	bulkhead("", p.Bulkhead)
	rateLimit := func(method string, r *runtime.RateLimitPolicy) {
		if r != nil && r.RequestsPerSecond == 0 {
			if l := t.find(method, "rate_limit"); l != nil {
				errs.add(l.keyFor("rate_limit.requests_per_second"), "is required: the annotation has no rate limit here, and an override that adds one must set the rate, as in rate_limit: {requests_per_second: 200}")
			}
		}
	}
	rateLimit("", p.RateLimit)
	for i := range p.Methods {
		m := &p.Methods[i]
		name := methodName(m.Name)
		bulkhead(name, m.Bulkhead)
		rateLimit(name, m.RateLimit)
		if r := m.Retry; r != nil && r.MaxAttempts > 1 && !m.Idempotent && m.IdempotencyKey == "" {
			if l := t.find(name, "retry"); l != nil {
				fix := "remove this override"
				if l.method == "" {
					fix += fmt.Sprintf(", or turn retries off for it with methods.%s.retry.max_attempts: 1", name)
				}
				errs.add(l.keyFor("retry"), "%s is not idempotent and has no idempotency_key, so a retry could apply it twice: %s", name, fix)
			}
		}
		if m.Timeout > 0 && m.OverallTimeout > 0 && m.Timeout > m.OverallTimeout {
			if l := t.blame(name, "timeout", "overall_timeout"); l != nil {
				errs.add(l.keyFor(l.path), "makes timeout %v longer than overall_timeout %v for %s: one attempt cannot outlast the whole call", m.Timeout, m.OverallTimeout, name)
			}
		}
		if h := m.Hedging; h != nil {
			if h.Delay == 0 {
				if l := t.find(name, "hedging"); l != nil {
					errs.add(l.keyFor("hedging.delay"), "is required: the annotation has no hedging here, and an override that adds it must set how long to wait before the next copy, about the method's p95, as in hedging: {delay: 80ms}")
				}
			}
			if !m.Idempotent {
				if l := t.find(name, "hedging"); l != nil {
					errs.add(l.keyFor("hedging"), "%s is not idempotent, and hedged copies run at the same time, so each could apply it: remove this override", name)
				}
			}
			if m.Retry != nil && m.Retry.MaxAttempts > 1 {
				if l := t.blame(name, "hedging.delay", "hedging.max_copies", "hedging.non_fatal_codes"); l != nil {
					errs.add(l.keyFor(l.path), "%s also retries: a method hedges or retries, not both; turn retries off with methods.%s.retry.max_attempts: 1", name, name)
				}
			}
		}
		if c := m.Cache; c != nil && c.StaleTTL < c.FreshTTL {
			if l := t.blame(name, "cache.fresh_ttl", "cache.stale_ttl"); l != nil {
				errs.add(l.keyFor(l.path), "makes stale_ttl %v shorter than fresh_ttl %v for %s: raise stale_ttl, or set it to fresh_ttl for no stale answers", c.StaleTTL, c.FreshTTL, name)
			}
		}
		if r := m.Retry; r != nil && r.MaxBackoff < r.InitialBackoff {
			if l := t.blame(name, "retry.initial_backoff", "retry.max_backoff"); l != nil {
				errs.add(l.keyFor(l.path), "makes max_backoff %v shorter than initial_backoff %v for %s: raise max_backoff or lower initial_backoff", r.MaxBackoff, r.InitialBackoff, name)
			}
		}
	}
	if len(errs) > 0 || t.refused() {
		return nil, errs.err() // nil when check reported them all
	}
	// The runtime's own check, last: anything it refuses that the checks
	// above did not name.
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("overrides of %s (%s): %w", t.name, strings.Join(sources(t.leaves), ", "), err)
	}
	return &p, nil
}

// blame returns the leaf that set one of paths for method, last in the
// order the leaves apply: the one whose value is in force.
func (t *service) blame(method string, paths ...string) *leaf {
	ordered := t.ordered()
	for i := len(ordered) - 1; i >= 0; i-- {
		l := ordered[i]
		if (l.method == method || l.method == "") && slices.Contains(paths, l.path) && !l.bad {
			return l
		}
	}
	return nil
}

// refused reports whether some leaf was refused on its own.
func (t *service) refused() bool {
	for _, l := range t.leaves {
		if l.bad {
			return true
		}
	}
	return false
}

// sources names where each leaf was set: a key of the file, or a variable.
func sources(leaves []*leaf) []string {
	out := make([]string, len(leaves))
	for i, l := range leaves {
		out[i] = l.source
	}
	return out
}

// applyLeaf sets one overridden value in p: a service's value in every
// method it concerns, as a service annotation does.
func (t *service) applyLeaf(p *runtime.ServicePolicy, l *leaf) error {
	group, field, _ := strings.Cut(l.path, ".")
	var methods []*runtime.MethodPolicy
	for i := range p.Methods {
		if l.method == "" || methodName(p.Methods[i].Name) == l.method {
			methods = append(methods, &p.Methods[i])
		}
	}
	switch group {
	case "timeout":
		for _, m := range methods {
			m.Timeout = l.value.(time.Duration)
		}
	case "overall_timeout":
		for _, m := range methods {
			m.OverallTimeout = l.value.(time.Duration)
		}
	case "retry":
		for _, m := range methods {
			if m.Kind != runtime.KindUnary {
				if l.method != "" {
					return fmt.Errorf("streams are not retried, and %s is a streaming method: remove this override", l.method)
				}
				continue // a stream ignores the retries of its service, as in the .proto
			}
			if m.Retry == nil {
				m.Retry = defaultRetry()
			}
			setRetry(m.Retry, field, l.value)
		}
	case "retry_budget":
		if p.Budget == nil {
			b := runtime.DefaultBudget
			p.Budget = &b
		}
		switch field {
		case "ratio":
			p.Budget.Ratio = l.value.(float64)
		case "min_retries":
			p.Budget.MinRetries = int(l.value.(uint32))
		case "window":
			p.Budget.Window = l.value.(time.Duration)
		}
	case "circuit_breaker":
		if l.method == "" {
			if p.Breaker == nil {
				p.Breaker = defaultBreaker()
			}
			setBreaker(p.Breaker, field, l.value)
			return nil
		}
		m := methods[0]
		if field == "per_method" {
			switch {
			case !l.value.(bool):
				m.Breaker = nil // back to the service's
			case m.Breaker == nil && p.Breaker != nil:
				b := *p.Breaker
				m.Breaker = &b
			case m.Breaker == nil:
				m.Breaker = defaultBreaker()
			}
			return nil
		}
		if m.Breaker == nil {
			return errors.New("the method has no circuit breaker of its own: add circuit_breaker.per_method: true beside this value to give it one, or, to tune the breaker the service's methods share, set this value on the service")
		}
		setBreaker(m.Breaker, field, l.value)
	case "bulkhead":
		if l.method == "" {
			if p.Bulkhead == nil {
				p.Bulkhead = &runtime.BulkheadPolicy{}
			}
			setBulkhead(p.Bulkhead, field, l.value)
			return nil
		}
		m := methods[0]
		if field == "per_method" {
			switch {
			case !l.value.(bool):
				m.Bulkhead = nil
			case m.Bulkhead == nil && p.Bulkhead != nil:
				b := *p.Bulkhead
				m.Bulkhead = &b
			case m.Bulkhead == nil:
				m.Bulkhead = &runtime.BulkheadPolicy{}
			}
			return nil
		}
		if m.Bulkhead == nil {
			return errors.New("the method has no bulkhead of its own: add bulkhead.per_method: true beside this value to give it one, or, to tune the bulkhead the service's methods share, set this value on the service")
		}
		setBulkhead(m.Bulkhead, field, l.value)
	case "hedging":
		m := methods[0] // the rules refuse hedging on a service
		if m.Kind != runtime.KindUnary {
			return fmt.Errorf("streams are not hedged, and %s is a streaming method: remove this override", l.method)
		}
		if m.Hedging == nil {
			m.Hedging = &runtime.HedgingPolicy{MaxCopies: rules.DefaultHedgingMaxCopies, NonFatalCodes: runtime.CodesOf(rules.DefaultNonFatalCodes...)}
		}
		switch field {
		case "delay":
			m.Hedging.Delay = l.value.(time.Duration)
		case "max_copies":
			m.Hedging.MaxCopies = int(l.value.(uint32))
		case "non_fatal_codes":
			m.Hedging.NonFatalCodes = codeSet(l.value.([]string))
		}
	case "rate_limit":
		if l.method == "" {
			if p.RateLimit == nil {
				p.RateLimit = &runtime.RateLimitPolicy{}
			}
			setRateLimit(p.RateLimit, field, l.value)
			return nil
		}
		m := methods[0]
		if field == "per_method" {
			switch {
			case !l.value.(bool):
				m.RateLimit = nil
			case m.RateLimit == nil && p.RateLimit != nil:
				r := *p.RateLimit
				m.RateLimit = &r
			case m.RateLimit == nil:
				m.RateLimit = &runtime.RateLimitPolicy{}
			}
			return nil
		}
		if m.RateLimit == nil {
			return errors.New("the method has no rate limit of its own: add rate_limit.per_method: true beside this value to give it one, or, to tune the limit the service's methods share, set this value on the service")
		}
		setRateLimit(m.RateLimit, field, l.value)
	case "cache":
		m := methods[0] // the rules refuse a cache on a service
		if m.Cache == nil {
			return errors.New("the method has no cache annotated: its key is generated from the cache's key_fields in the .proto; add the cache there and regenerate")
		}
		switch field {
		case "fresh_ttl":
			m.Cache.FreshTTL = l.value.(time.Duration)
		case "stale_ttl":
			m.Cache.StaleTTL = l.value.(time.Duration)
		case "max_entries":
			m.Cache.MaxEntries = int(l.value.(uint32))
		}
	}
	return nil
}

// setRateLimit sets one value of a rate limit; a limit given a rate and no
// burst gets the default burst, the rate rounded up.
func setRateLimit(r *runtime.RateLimitPolicy, field string, v any) {
	switch field {
	case "requests_per_second":
		r.RequestsPerSecond = v.(float64)
		if r.Burst == 0 {
			r.Burst = rules.DefaultBurst(r.RequestsPerSecond)
		}
	case "burst":
		r.Burst = int(v.(uint32))
	case "max_wait":
		r.MaxWait = v.(time.Duration)
	}
}

func defaultRetry() *runtime.RetryPolicy {
	return &runtime.RetryPolicy{MaxAttempts: rules.DefaultMaxAttempts, InitialBackoff: rules.DefaultInitialBackoff,
		MaxBackoff: rules.DefaultMaxBackoff, Multiplier: rules.DefaultMultiplier, RetryableCodes: runtime.CodesOf(rules.DefaultRetryableCodes...)}
}

func defaultBreaker() *runtime.BreakerPolicy {
	return &runtime.BreakerPolicy{FailureRatio: rules.DefaultFailureRatio, MinimumCalls: rules.DefaultMinimumCalls,
		Window: rules.DefaultBreakerWindow, CoolDown: rules.DefaultCoolDown, HalfOpenProbes: rules.DefaultHalfOpenProbes,
		FailureCodes: runtime.CodesOf(rules.DefaultFailureCodes...)}
}

func codeSet(names []string) runtime.CodeSet {
	return runtime.CodesOf(rules.CodesOf(names, []codes.Code{})...)
}

func setRetry(r *runtime.RetryPolicy, field string, v any) {
	switch field {
	case "max_attempts":
		r.MaxAttempts = int(v.(uint32))
	case "initial_backoff":
		r.InitialBackoff = v.(time.Duration)
	case "max_backoff":
		r.MaxBackoff = v.(time.Duration)
	case "backoff_multiplier":
		r.Multiplier = v.(float64)
	case "retryable_codes":
		r.RetryableCodes = codeSet(v.([]string))
	}
}

func setBreaker(b *runtime.BreakerPolicy, field string, v any) {
	switch field {
	case "failure_ratio":
		b.FailureRatio = v.(float64)
	case "minimum_calls":
		b.MinimumCalls = int(v.(uint32))
	case "window":
		b.Window = v.(time.Duration)
	case "cool_down":
		b.CoolDown = v.(time.Duration)
	case "half_open_probes":
		b.HalfOpenProbes = int(v.(uint32))
	case "slow_call_threshold":
		b.SlowCallThreshold = v.(time.Duration)
	case "failure_codes":
		b.FailureCodes = codeSet(v.([]string))
	}
}

func setBulkhead(b *runtime.BulkheadPolicy, field string, v any) {
	switch field {
	case "permits":
		b.Permits = int(v.(uint32))
	case "max_wait":
		b.MaxWait = v.(time.Duration)
	}
}
