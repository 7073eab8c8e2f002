package runtime

import (
	"fmt"
	"github.com/go-resilient/resilient/runtime/policy"
	"strconv"
	"strings"
)

// Change is one value of the policy that an edit (WithPolicy,
// WithPolicyFrom, an override) changed from what the generated literal
// holds, that is from the annotation or its default.
type Change struct {
	// Key names the value with the field names of the annotations, under
	// "methods.<Method>." for a method: "retry_budget.ratio",
	// "methods.GetStock.timeout", "methods.GetStock.retry.max_attempts".
	Key string
	// Annotated is the value of the annotation (or its default); "none" when
	// the annotation set nothing there.
	Annotated string
	// Value is the value in force.
	Value string
	// Source is where the last edit of the value came from: the key of an
	// override as written, the name given to WithPolicyFrom, or
	// "WithPolicy".
	Source string
}

// Changes returns the values that edits changed from the annotation, in
// the order the edits first changed them; every other value is the
// annotation's.
func (c *Client) Changes() []Change { return append([]Change(nil), c.changes...) }

// Describe renders the policy in force, followed by every
// value that differs from the annotation, with where it came from.
func (c *Client) Describe() string {
	var b strings.Builder
	b.WriteString(describe(&c.policy))
	if len(c.changes) == 0 {
		b.WriteString("  every value as annotated\n")
		return b.String()
	}
	b.WriteString("  changed from the annotation (annotated → in force, from):\n")
	for _, ch := range c.changes {
		fmt.Fprintf(&b, "    %s: %s → %s (%s)\n", ch.Key, ch.Annotated, ch.Value, ch.Source)
	}
	return b.String()
}

// setting is one value of a flattened policy.
type setting struct{ key, value string }

// flatten lists every value of p under the keys of Change.
func flatten(p *policy.Service) []setting {
	var out []setting
	add := func(key string, v any) {
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case float64:
			s = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			s = fmt.Sprint(v)
		}
		out = append(out, setting{key, s})
	}
	if b := p.Budget; b != nil {
		add("retry_budget.ratio", b.Ratio)
		add("retry_budget.min_retries", b.MinRetries)
		add("retry_budget.window", b.Window)
	}
	breaker := func(prefix string, b *policy.Breaker) {
		if b == nil {
			add(prefix, "none")
			return
		}
		add(prefix+".failure_ratio", b.FailureRatio)
		add(prefix+".minimum_calls", b.MinimumCalls)
		add(prefix+".window", b.Window)
		if b.WindowCalls > 0 {
			add(prefix+".window_calls", b.WindowCalls)
		}
		add(prefix+".cool_down", b.CoolDown)
		add(prefix+".half_open_probes", b.HalfOpenProbes)
		add(prefix+".slow_call_threshold", orNone(b.SlowCallThreshold.String(), b.SlowCallThreshold == 0))
		add(prefix+".failure_codes", b.FailureCodes)
	}
	bulkhead := func(prefix string, b *policy.Bulkhead) {
		if b == nil {
			add(prefix, "none")
			return
		}
		add(prefix+".permits", b.Permits)
		add(prefix+".max_wait", b.MaxWait)
	}
	rateLimit := func(prefix string, r *policy.RateLimit) {
		add(prefix+".requests_per_second", r.RequestsPerSecond)
		add(prefix+".burst", r.Burst)
		add(prefix+".max_wait", r.MaxWait)
	}
	breaker("circuit_breaker", p.Breaker)
	bulkhead("bulkhead", p.Bulkhead)
	if p.RateLimit != nil {
		rateLimit("rate_limit", p.RateLimit)
	}
	if p.AdaptiveLimit != nil {
		flattenAdaptive(add, "adaptive_limit", p.AdaptiveLimit)
	}
	if t := p.ClientThrottle; t != nil {
		add("client_throttle.k", t.K)
		add("client_throttle.window", t.Window)
		add("client_throttle.max_refusal", t.MaxRefusal)
	}
	for i := range p.Methods {
		m := &p.Methods[i]
		pre := "methods." + shortName(m.Name) + "."
		add(pre+"idempotent", m.Idempotent)
		add(pre+"idempotency_key", orNone(m.IdempotencyKey, m.IdempotencyKey == ""))
		add(pre+"timeout", orNone(m.Timeout.String(), m.Timeout == 0))
		add(pre+"overall_timeout", orNone(m.OverallTimeout.String(), m.OverallTimeout == 0))
		// A retry of one attempt is listed as such: an edit that turns
		// retries off changes max_attempts, and the trail shows it.
		if r := m.Retry; r != nil {
			add(pre+"retry.max_attempts", r.MaxAttempts)
			add(pre+"retry.initial_backoff", r.InitialBackoff)
			add(pre+"retry.max_backoff", r.MaxBackoff)
			add(pre+"retry.backoff_multiplier", r.Multiplier)
			add(pre+"retry.retryable_codes", r.RetryableCodes)
		} else {
			add(pre+"retry", "none")
		}
		// A method without a breaker or bulkhead of its own uses the
		// service's: only its own are the method's values.
		if m.Breaker != nil {
			breaker(pre+"circuit_breaker", m.Breaker)
		}
		if m.Bulkhead != nil {
			bulkhead(pre+"bulkhead", m.Bulkhead)
		}
		if m.GenerateIdempotencyKey {
			add(pre+"generate_idempotency_key", true)
		}
		if m.Priority != policy.PriorityUnspecified {
			add(pre+"priority", m.Priority.String())
		}
		if h := m.Hedging; h != nil {
			add(pre+"hedging.delay", h.Delay)
			add(pre+"hedging.max_copies", h.MaxCopies)
			add(pre+"hedging.non_fatal_codes", h.NonFatalCodes)
		}
		if m.RateLimit != nil {
			rateLimit(pre+"rate_limit", m.RateLimit)
		}
		if m.AdaptiveLimit != nil {
			flattenAdaptive(add, pre+"adaptive_limit", m.AdaptiveLimit)
		}
		if c := m.Cache; c != nil {
			add(pre+"cache.fresh_ttl", c.FreshTTL)
			add(pre+"cache.stale_ttl", c.StaleTTL)
			add(pre+"cache.max_entries", c.MaxEntries)
		}
	}
	return out
}

// editName names the option an edit came from, for errors.
func editName(source string) string {
	if source == "WithRecordedPolicy" {
		return source
	}
	return "WithPolicy"
}

// applyEdit applies one edit to p and returns changes with what it
// changed merged in: the edit's own record (WithRecordedPolicy), or, for
// a plain edit, what differs between the policy before and after it; or
// the error of a recorded edit that could not apply.
func applyEdit(p *policy.Service, e policyEdit, changes []Change) ([]Change, error) {
	if e.recorded != nil {
		record, err := e.recorded(p)
		if err != nil {
			return nil, err
		}
		return merge(changes, record), nil
	}
	before := flatten(p)
	e.apply(p)
	return merge(changes, diff(before, flatten(p), e.source)), nil
}

// diff lists what one edit, from source, changed between the flattened
// policies before and after it, each with its value before the edit as
// Annotated.
func diff(before, after []setting, source string) []Change {
	was := make(map[string]string, len(before))
	for _, s := range before {
		was[s.key] = s.value
	}
	// A value the edit removed (a method's own breaker given back) is
	// "none" after it.
	now := make(map[string]bool, len(after))
	for _, s := range after {
		now[s.key] = true
	}
	for _, s := range before {
		if !now[s.key] {
			after = append(after, setting{s.key, "none"})
		}
	}
	var out []Change
	for _, s := range after {
		old, ok := was[s.key]
		if ok && old == s.value {
			continue
		}
		if !ok {
			old = "none"
		}
		out = append(out, Change{Key: s.key, Annotated: old, Value: s.value, Source: source})
	}
	return out
}

// merge adds to changes those of one edit, in order, each with its value
// before the edit as Annotated: a value changed before keeps its
// annotated value and takes the edit's value and source.
func merge(changes, edit []Change) []Change {
	for _, e := range edit {
		found := false
		for i := range changes {
			if changes[i].Key == e.Key {
				changes[i].Value, changes[i].Source, found = e.Value, e.Source, true
			}
		}
		if !found {
			changes = append(changes, e)
		}
	}
	// An edit may set a value back to the annotation's: no longer a change.
	kept := changes[:0]
	for _, ch := range changes {
		if ch.Value != ch.Annotated {
			kept = append(kept, ch)
		}
	}
	return kept
}
