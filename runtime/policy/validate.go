// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/internal/window"
)

// Validate checks that the policy can be applied: names set, counts and
// durations positive, ratios in (0, 1], retries only on methods that may be
// repeated. The plugin refuses the same mistakes in the .proto, with their
// position; Validate guards policies built or changed in Go. The error
// names every field that is wrong, one line each (Problems).
func (p *Service) Validate() error {
	var errs []error
	for _, pr := range p.Problems() {
		errs = append(errs, fmt.Errorf("resilient: policy %s: %s: %s", p.Name, pr.Field, pr.Message))
	}
	return errors.Join(errs...)
}

// Problem is one reason Validate refuses a policy, named both as Go
// names the field and as the annotations and overrides do.
type Problem struct {
	// Field is the Go path of the field: "Breaker.CoolDown",
	// "Methods[0] (/pkg.Service/GetStock).Retry.MaxBackoff".
	Field string
	// Method is the method's name without its service ("GetStock"), ""
	// for a value of the service.
	Method string
	// Key is the field's path in the options' names ("circuit_breaker.cool_down",
	// "retry.max_backoff"), as an override file writes it under the
	// service or the method.
	Key string
	// Message says what is wrong and how to mend it.
	Message string
}

// Problems lists, in the order of the policy, every reason Validate
// refuses p; none for a valid policy. The override loader reports them at
// the key that made them so.
func (p *Service) Problems() []Problem {
	var out []Problem
	method := ""
	bad := func(field, format string, args ...any) {
		out = append(out, Problem{Field: field, Method: method, Key: optionKey(field), Message: fmt.Sprintf(format, args...)})
	}
	if p.Name == "" {
		bad("Name", "empty: set the full service name")
	}
	if p.Budget != nil {
		p.Budget.check("Budget", bad)
	}
	if p.Breaker != nil {
		p.Breaker.check("Breaker", bad)
	}
	if p.Bulkhead != nil {
		p.Bulkhead.check("Bulkhead", bad)
	}
	if p.RateLimit != nil {
		p.RateLimit.check("RateLimit", bad)
	}
	checkAdaptive("AdaptiveLimit", p.AdaptiveLimit, p.Bulkhead, bad)
	checkThrottle("ClientThrottle", p.ClientThrottle, bad)
	seen := make(map[string]bool, len(p.Methods))
	for i := range p.Methods {
		m := &p.Methods[i]
		method = shortName(m.Name)
		f := fmt.Sprintf("Methods[%d] (%s)", i, m.Name)
		if m.Name == "" {
			bad(f+".Name", "empty: set the full method name, /pkg.Service/Method")
		} else if seen[m.Name] {
			bad(f+".Name", "appears twice")
		}
		seen[m.Name] = true
		if m.Timeout < 0 {
			bad(f+".Timeout", "must not be negative, got %s; use 0 for no per-attempt limit", m.Timeout)
		}
		if m.OverallTimeout < 0 {
			bad(f+".OverallTimeout", "must not be negative, got %s; use 0 for no limit of the whole call", m.OverallTimeout)
		}
		if m.Timeout > 0 && m.OverallTimeout > 0 && m.Timeout > m.OverallTimeout {
			bad(f+".Timeout", "timeout %s is longer than overall_timeout %s: one attempt cannot outlast the whole call; shorten timeout or lengthen overall_timeout", m.Timeout, m.OverallTimeout)
		}
		if m.Retry != nil {
			m.Retry.check(f+".Retry", bad)
			if m.Retry.MaxAttempts > 1 && !m.Idempotent && m.IdempotencyKey == "" && !m.GenerateIdempotencyKey {
				bad(f+".Retry", "%s is not idempotent and has no idempotency_key, so a retry could apply it twice: do not retry it (no retry, or retry.max_attempts: 1)", method)
			}
			if m.Retry.MaxAttempts > 1 && m.Kind != KindUnary {
				bad(f+".Retry", "streams are not retried, and %s is a streaming method: remove its retry", method)
			}
		}
		if m.Breaker != nil {
			m.Breaker.check(f+".Breaker", bad)
		}
		if m.Bulkhead != nil {
			m.Bulkhead.check(f+".Bulkhead", bad)
		}
		if m.Priority > PriorityCritical {
			bad(f+".Priority", "unknown priority %d: use PriorityLow, PriorityNormal, PriorityHigh or PriorityCritical (or PriorityUnspecified for none)", uint8(m.Priority))
		}
		m.checkPatterns(f, bad)
		m.checkAdaptive(f, p, bad)
	}
	return out
}

// optionKey turns the Go path of a field ("Methods[0] (/p.S/Get).Retry.MaxBackoff",
// "Breaker.CoolDown") into its path in the options ("retry.max_backoff",
// "circuit_breaker.cool_down"), without the method.
func optionKey(field string) string {
	if i := strings.Index(field, ")."); strings.HasPrefix(field, "Methods[") && i >= 0 {
		field = field[i+2:]
	}
	parts := strings.Split(field, ".")
	for i, part := range parts {
		if k, ok := optionNames[part]; ok {
			parts[i] = k
			continue
		}
		parts[i] = snake(part)
	}
	return strings.Join(parts, ".")
}

// optionNames are the Go fields whose option is not named by snake case.
var optionNames = map[string]string{
	"Budget":     "retry_budget",
	"Breaker":    "circuit_breaker",
	"Multiplier": "backoff_multiplier",
	"FreshTTL":   "fresh_ttl",
	"StaleTTL":   "stale_ttl",
}

// snake turns a Go name into snake case: MaxBackoff → max_backoff.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

type badFunc func(field, format string, args ...any)

func positive(d time.Duration, field string, bad badFunc) {
	if d <= 0 {
		bad(field, "must be positive, got %s", d)
	}
}

func ratio(r float64, field string, bad badFunc) {
	if math.IsNaN(r) || r <= 0 || r > 1 {
		bad(field, "must be in (0, 1], got %v", r)
	}
}

func (r *Retry) check(f string, bad badFunc) {
	if r.MaxAttempts < 1 {
		bad(f+".MaxAttempts", "must be at least 1, got %d (it counts the first attempt, and 1 means no retry)", r.MaxAttempts)
	}
	positive(r.InitialBackoff, f+".InitialBackoff", bad)
	positive(r.MaxBackoff, f+".MaxBackoff", bad)
	if r.MaxBackoff < r.InitialBackoff {
		bad(f+".MaxBackoff", "max_backoff %s is shorter than initial_backoff %s: raise max_backoff or lower initial_backoff", r.MaxBackoff, r.InitialBackoff)
	}
	if math.IsNaN(r.Multiplier) || math.IsInf(r.Multiplier, 0) || r.Multiplier < 1 {
		bad(f+".Multiplier", "must be a finite number of at least 1, got %v", r.Multiplier)
	}
	undefined(r.RetryableCodes, f+".RetryableCodes", bad)
	if r.RetryableCodes.Has(0) {
		bad(f+".RetryableCodes", `"OK" is a success, there is nothing to retry: remove it`)
	}
	if answers := r.RetryableCodes & answerCodes; answers != 0 {
		bad(f+".RetryableCodes", "holds %s, answers of the service and not transient failures: repeating the call cannot change them; remove them", answers)
	}
}

// answerCodes are the codes the plugin refuses as retryable: the service
// understood the request and answered it.
var answerCodes = CodesOf(contract.AnswerCodes...)

// definedCodes are the codes gRPC defines, OK to UNAUTHENTICATED.
const definedCodes = CodeSet(1<<(codes.Unauthenticated+1) - 1)

// undefined refuses a set holding a number gRPC defines no code for,
// which a .proto or an override, naming codes, cannot write.
func undefined(s CodeSet, f string, bad badFunc) {
	if u := s &^ definedCodes; u != 0 {
		bad(f, "holds %s, numbers gRPC defines no code for: name the codes (codes.Unavailable)", u)
	}
}

func (b *Budget) check(f string, bad badFunc) {
	ratio(b.Ratio, f+".Ratio", bad)
	if b.MinRetries < 0 {
		bad(f+".MinRetries", "must not be negative, got %d", b.MinRetries)
	}
	positive(b.Window, f+".Window", bad)
}

func (b *Breaker) check(f string, bad badFunc) {
	ratio(b.FailureRatio, f+".FailureRatio", bad)
	if b.MinimumCalls < 1 {
		bad(f+".MinimumCalls", "must be at least 1, got %d", b.MinimumCalls)
	}
	b.checkWindow(f, bad)
	positive(b.CoolDown, f+".CoolDown", bad)
	if b.HalfOpenProbes < 1 || b.HalfOpenProbes > maxProbes {
		bad(f+".HalfOpenProbes", "must be from 1 to %d, got %d: a handful of probes tells whether the dependency is back", maxProbes, b.HalfOpenProbes)
	}
	if b.SlowCallThreshold < 0 {
		bad(f+".SlowCallThreshold", "must not be negative, got %s; use 0 to count no call as slow", b.SlowCallThreshold)
	}
	if b.FailureCodes == 0 {
		bad(f+".FailureCodes", "is empty: the breaker could never open; list the codes that count as failures, as in [UNAVAILABLE, DEADLINE_EXCEEDED]")
	}
	undefined(b.FailureCodes, f+".FailureCodes", bad)
	if b.FailureCodes.Has(0) {
		bad(f+".FailureCodes", `"OK" is a success and cannot count as a failure: remove it`)
	}
	if answers := b.FailureCodes & answerCodes; answers != 0 {
		bad(f+".FailureCodes", "holds %s, answers of the service and not failures of it: an answer shows the dependency is up, so it never opens the breaker; remove them", answers)
	}
}

func (b *Bulkhead) check(f string, bad badFunc) {
	if b.Permits < 1 {
		bad(f+".Permits", "must be at least 1, got %d: it is the number of calls allowed in flight at once", b.Permits)
	}
	if b.MaxWait < 0 {
		bad(f+".MaxWait", "must not be negative, got %s; use 0 to refuse a call at once when every permit is taken", b.MaxWait)
	}
}

// checkPatterns checks hedging, the rate limit, the cache and generated
// idempotency keys.
func (m *Method) checkPatterns(f string, bad badFunc) {
	if m.GenerateIdempotencyKey {
		if m.IdempotencyKey != "" {
			bad(f+".GenerateIdempotencyKey", "the method already sends its field %q as the idempotency key: set one or the other", m.IdempotencyKey)
		}
		if m.Kind != KindUnary {
			bad(f+".GenerateIdempotencyKey", "only unary calls send an idempotency key, and %s is a streaming method", shortName(m.Name))
		}
	}
	name := shortName(m.Name)
	if h := m.Hedging; h != nil {
		h.check(f+".Hedging", bad)
		if !m.Idempotent {
			bad(f+".Hedging", "%s is not idempotent, and hedged copies run at the same time, so each could apply it: remove hedging", name)
		}
		if m.Kind != KindUnary {
			bad(f+".Hedging", "streams are not hedged, and %s is a streaming method: remove hedging", name)
		}
		if m.Retry != nil && m.Retry.MaxAttempts > 1 {
			bad(f+".Hedging", "%s also retries: a method hedges or retries, not both, since hedged copies already repeat the call; remove one, or turn retries off for it with retry.max_attempts: 1", name)
		}
		if m.Timeout > 0 && h.Delay >= m.Timeout {
			bad(f+".Hedging.Delay", "%s is not shorter than timeout %s: each copy would time out before the next is sent; shorten the delay (about the p95) or lengthen timeout", h.Delay, m.Timeout)
		}
		if m.OverallTimeout > 0 && h.Delay >= m.OverallTimeout {
			bad(f+".Hedging.Delay", "%s is not shorter than overall_timeout %s: no copy could be sent before the call ends; shorten the delay (about the p95)", h.Delay, m.OverallTimeout)
		}
	}
	if m.RateLimit != nil {
		m.RateLimit.check(f+".RateLimit", bad)
		if m.Kind != KindUnary {
			bad(f+".RateLimit", "opening a stream takes no token, and %s is a streaming method: remove its rate limit", name)
		}
	}
	if c := m.Cache; c != nil {
		c.check(f+".Cache", bad)
		if !m.Idempotent {
			bad(f+".Cache", "%s is not idempotent: only reads are cached, since a cached answer means the call is not made; remove cache", name)
		}
		if m.Kind != KindUnary {
			bad(f+".Cache", "streams are not cached, and %s is a streaming method: remove cache", name)
		}
		if m.Timeout == 0 && m.OverallTimeout == 0 {
			bad(f+".Cache", "%s has neither timeout nor overall_timeout: the call shared by the callers of a key runs detached from them, with the method's own limit; set timeout or overall_timeout", name)
		}
	}
}

// shortName is a method's name without its service: "/pkg.S/Get" → "Get".
func shortName(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}

// maxProbes is the most half-open probes a breaker counts.
const maxProbes = contract.MaxHalfOpenProbes

// checkWindow checks the breaker's window: a duration, or a number of calls
// that MinimumCalls can reach.
func (b *Breaker) checkWindow(f string, bad badFunc) {
	switch {
	case b.WindowCalls < 0 || b.WindowCalls > window.MaxCount:
		bad(f+".WindowCalls", "must be in [1, %d], or 0 for a window in time, is %d", window.MaxCount, b.WindowCalls)
	case b.WindowCalls > 0:
		if b.MinimumCalls > b.WindowCalls {
			bad(f+".MinimumCalls", "%d is more than the %d calls the window holds: the breaker could never open", b.MinimumCalls, b.WindowCalls)
		}
	default:
		positive(b.Window, f+".Window", bad)
	}
}
