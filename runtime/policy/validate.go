// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/contract"
)

// Validate checks that the policy can be applied: names set, counts and
// durations positive, ratios in (0, 1], retries only on methods that may be
// repeated. The plugin refuses the same mistakes in the .proto, with their
// position and in the same words (internal/check says what is wrong with
// a value for both); Validate guards policies built or changed in Go. The
// error names every field that is wrong, one line each (Problems).
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
	// The budget in force: the service's, else DefaultBudget for a
	// service that retries, which a program may have changed.
	if b := p.BudgetInForce(); b != nil {
		b.check("Budget", bad)
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
		fail(bad, f+".Timeout", check.NotNegative(m.Timeout), "; use 0 for no per-attempt limit")
		fail(bad, f+".OverallTimeout", check.NotNegative(m.OverallTimeout), "; use 0 for no limit of the whole call")
		// The pairs name their subject: the override loader reports them
		// at the key of either value.
		fail(bad, f+".Timeout", subject("timeout", check.Timeout(m.Timeout, m.OverallTimeout, "")), "; shorten timeout or lengthen overall_timeout")
		if m.Retry != nil {
			m.Retry.check(f+".Retry", bad)
			if m.Retry.MaxAttempts > 1 {
				fail(bad, f+".Retry", check.RetrySafe(method, m.Idempotent, m.IdempotencyKey != "" || m.GenerateIdempotencyKey), ": do not retry it (no retry, or retry.max_attempts: 1)")
				fail(bad, f+".Retry", check.StreamRetry(method, m.Kind.describe()), ": remove its retry")
			}
		}
		if m.Breaker != nil {
			m.Breaker.check(f+".Breaker", bad)
		}
		if m.Bulkhead != nil {
			m.Bulkhead.check(f+".Bulkhead", bad)
		}
		checkPriority(m.Priority, f+".Priority", bad)
		if m.Kind == KindUnary && m.Timeout >= 0 && (m.AdaptiveLimit != nil || p.AdaptiveLimit != nil) {
			fail(bad, f+".AdaptiveLimit", check.AdaptiveTimeout(method, m.Timeout), "; set Timeout, or remove the adaptive limit")
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
		parts[i] = contract.OptionName(part)
	}
	return strings.Join(parts, ".")
}

type badFunc func(field, format string, args ...any)

// fail reports problem, the core of a message from package check, at
// field, followed by fix (how a Go author mends it, "" for nothing more);
// nothing when problem is "".
func fail(bad badFunc, field, problem, fix string) {
	if problem != "" {
		bad(field, "%s%s", problem, fix)
	}
}

// subject puts the option name of the value a check of two values blames
// in front of its problem ("max_backoff 10ms is shorter than …"), "" for
// none.
func subject(option, problem string) string {
	if problem == "" {
		return ""
	}
	return option + " " + problem
}

// codeList reports the problems of a list of status codes held as a set.
func codeList(bad badFunc, field string, l check.List, s CodeSet) {
	// A number gRPC defines no code for cannot be written in a .proto or
	// an override, which name the codes.
	if u := s &^ CodeSet(1<<(codes.Unauthenticated+1)-1); u != 0 {
		bad(field, "holds %s, numbers gRPC defines no code for: name the codes (codes.Unavailable)", u)
	}
	for _, msg := range check.Codes(l, s.Codes()) {
		bad(field, "%s", msg)
	}
}

// describe says what kind of streaming method k is, for a message ("a
// server-streaming method"); "" for a unary one. A Kind that is none of
// the four is refused as a stream, as the runtime treats it.
func (k Kind) describe() string {
	if d := check.Kind(k == KindClientStreaming || k == KindBidiStreaming, k == KindServerStreaming || k == KindBidiStreaming); d != "" || k == KindUnary {
		return d
	}
	return "a streaming method"
}

func positive(d time.Duration, field string, bad badFunc) {
	fail(bad, field, check.Positive(d), "")
}

func ratio(r float64, field string, bad badFunc) {
	fail(bad, field, check.Ratio(r), "")
}

func (r *Retry) check(f string, bad badFunc) {
	fail(bad, f+".MaxAttempts", check.MaxAttempts(int64(r.MaxAttempts)), "")
	positive(r.InitialBackoff, f+".InitialBackoff", bad)
	positive(r.MaxBackoff, f+".MaxBackoff", bad)
	fail(bad, f+".MaxBackoff", subject("max_backoff", check.MaxBackoff(r.InitialBackoff, r.MaxBackoff, "")), "")
	fail(bad, f+".Multiplier", check.Multiplier(r.Multiplier), "")
	codeList(bad, f+".RetryableCodes", check.Retryable, r.RetryableCodes)
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
	fail(bad, f+".MinimumCalls", check.AtLeastOne(int64(b.MinimumCalls)), "")
	b.checkWindow(f, bad)
	positive(b.CoolDown, f+".CoolDown", bad)
	fail(bad, f+".HalfOpenProbes", check.Probes(int64(b.HalfOpenProbes)), "")
	fail(bad, f+".SlowCallThreshold", check.NotNegative(b.SlowCallThreshold), "; use 0 to count no call as slow")
	if b.FailureCodes == 0 {
		// Only in Go: an options list left empty takes the default.
		bad(f+".FailureCodes", "is empty: the breaker could never open; list the codes that count as failures, as in [UNAVAILABLE, DEADLINE_EXCEEDED]")
	}
	codeList(bad, f+".FailureCodes", check.Failure, b.FailureCodes)
}

func (b *Bulkhead) check(f string, bad badFunc) {
	fail(bad, f+".Permits", check.AtLeastOne(int64(b.Permits)), ": it is the number of calls allowed in flight at once")
	fail(bad, f+".MaxWait", check.NotNegative(b.MaxWait), "; use 0 to refuse a call at once when every permit is taken")
}

// checkPatterns checks hedging, the rate limit, the cache and generated
// idempotency keys.
func (m *Method) checkPatterns(f string, bad badFunc) {
	name, kind := shortName(m.Name), m.Kind.describe()
	if m.GenerateIdempotencyKey {
		fail(bad, f+".GenerateIdempotencyKey", check.KeyTwice(m.IdempotencyKey, true), ": set one or the other")
		fail(bad, f+".GenerateIdempotencyKey", check.StreamKey(name, kind), ": remove it")
	}
	if h := m.Hedging; h != nil {
		h.check(f+".Hedging", bad)
		fail(bad, f+".Hedging", check.HedgingIdempotent(name, m.Idempotent), ": remove hedging")
		fail(bad, f+".Hedging", check.StreamHedging(name, kind), ": remove hedging")
		fail(bad, f+".Hedging", check.HedgingRetries(name, m.Retry != nil && m.Retry.MaxAttempts > 1, ""), "; remove one, or turn retries off for it with retry.max_attempts: 1")
		fail(bad, f+".Hedging.Delay", check.HedgingDelay(h.Delay, m.Timeout, m.OverallTimeout, "", ""), "")
	}
	if m.RateLimit != nil {
		m.RateLimit.check(f+".RateLimit", bad)
		if m.Kind != KindUnary {
			bad(f+".RateLimit", "opening a stream takes no token, and %s is a streaming method: remove its rate limit", name)
		}
	}
	if c := m.Cache; c != nil {
		c.check(f+".Cache", bad)
		fail(bad, f+".Cache", check.CacheIdempotent(name, m.Idempotent), "; remove cache")
		fail(bad, f+".Cache", check.StreamCache(name, kind), ": remove cache")
		fail(bad, f+".Cache", check.CacheTimeout(name, m.Timeout, m.OverallTimeout), "")
	}
}

// shortName is a method's name without its service: "/pkg.S/Get" → "Get".
func shortName(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}

// checkWindow checks the breaker's window: a duration, or a number of calls
// that MinimumCalls can reach.
func (b *Breaker) checkWindow(f string, bad badFunc) {
	if b.WindowCalls == 0 {
		positive(b.Window, f+".Window", bad)
		return
	}
	if msg := check.WindowCalls(int64(b.WindowCalls)); msg != "" {
		fail(bad, f+".WindowCalls", msg, "; use 0 for a window in time")
		return
	}
	fail(bad, f+".MinimumCalls", check.MinimumAboveWindow(int64(b.WindowCalls), int64(b.MinimumCalls)), "")
}
