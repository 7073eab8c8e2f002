// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/check"
)

// Validate checks that the policy can be applied: names set, counts and
// durations positive, ratios in (0, 1], retries only on methods that may be
// repeated. The plugin refuses the same mistakes in the .proto, with their
// position and in the same words (internal/check says what is wrong with
// a value for both), each naming the values as its author writes them:
// Validate as Go names the fields ("StaleTTL 1ms is shorter than FreshTTL
// 1s"), the plugin as the options do ("… than fresh_ttl 1s"). Validate
// guards policies built or changed in Go. The error names every field
// that is wrong, one line each (Problems).
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
	// Message says what is wrong and how to mend it, naming the values
	// as Go names the fields ("StaleTTL 1ms is shorter than FreshTTL 1s",
	// "raise StaleTTL", "Retry.MaxAttempts 1"): how Validate,
	// runtime.NewClient and server.NewGuard report it.
	Message string
	// OptionsMessage is Message naming the values in the options' names
	// ("stale_ttl 1ms is shorter than fresh_ttl 1s", "raise stale_ttl",
	// "retry.max_attempts: 1"), as an operator writes them: how the
	// override loader reports it. Both are written from one text.
	OptionsMessage string
	// Core is what is wrong, as an options author reads it
	// (internal/check's core in the options' names, with any hint true
	// for an options author too): OptionsMessage without the mend only a
	// Go author can make ("; use 0 for none") and without the name of the
	// value it is about. The options boundaries (internal/rules) add
	// their own mend.
	Core string
	// Unset is what leaving the value out stands for, where the options
	// contract's table of defaults does not say it (a value whose zero
	// means none, or whose default follows another value), in words that
	// follow "use 0" or "remove it" ("for no per-attempt limit", "for the
	// default 100, or the bulkhead's permits if fewer"); "" otherwise.
	Unset string
	// Pair says the problem relates the value to another one (max_backoff
	// to initial_backoff) or to the method it is set on: the options
	// boundaries check such problems once the levels are merged, blaming
	// the level of either value.
	Pair bool
	// With names, in the form of Key ("retry.initial_backoff",
	// "overall_timeout", "bulkhead.permits"), the other values that make
	// the value wrong together with it: changing any of them may mend it,
	// so the override loader blames an override of either. Empty for a
	// problem of one value, and for one of the value and the kind of the
	// method it is set on (a stream), which no option sets. Filled by
	// every check of two or more values, Pair or not (a cache's stale_ttl
	// against its fresh_ttl, checked within the group).
	With []string
}

// Problems lists, in the order of the policy, every reason Validate
// refuses p; none for a valid policy. The override loader reports them at
// the key that made them so.
func (p *Service) Problems() []Problem {
	var out []Problem
	r := &reporter{add: func(pr Problem) { out = append(out, pr) }}
	if p.Name == "" {
		r.bad("Name", "empty: set the full service name")
	}
	// The budget in force: the service's, else DefaultBudget for a
	// service that retries, which a program may have changed.
	if b := p.BudgetInForce(); b != nil {
		b.check("Budget", r)
	}
	if p.Breaker != nil {
		p.Breaker.check("Breaker", r)
	}
	if p.Bulkhead != nil {
		p.Bulkhead.check("Bulkhead", r)
	}
	if p.RateLimit != nil {
		p.RateLimit.check("RateLimit", r)
	}
	checkAdaptive("AdaptiveLimit", p.AdaptiveLimit, p.Bulkhead, r)
	checkThrottle("ClientThrottle", p.ClientThrottle, r)
	seen := make(map[string]bool, len(p.Methods))
	for i := range p.Methods {
		m := &p.Methods[i]
		method := shortName(m.Name)
		r.method = method
		f := fmt.Sprintf("Methods[%d] (%s)", i, m.Name)
		if m.Name == "" {
			r.bad(f+".Name", "empty: set the full method name, /pkg.Service/Method")
		} else if seen[m.Name] {
			r.bad(f+".Name", "listed twice: keep one entry per method")
		}
		seen[m.Name] = true
		m.checkTimeouts(f, r)
		if m.Retry != nil {
			m.Retry.check(f+".Retry", r)
			if m.Retry.MaxAttempts > 1 {
				r.pair(f+".Retry", "", []string{f + ".Idempotent", f + ".IdempotencyKey", f + ".GenerateIdempotencyKey"}, check.RetrySafe(method, m.Idempotent, m.IdempotencyKey != "" || m.GenerateIdempotencyKey), ": do not retry it (no {Retry}, or {Retry.MaxAttempts: 1})")
				r.pair(f+".Retry", "", nil, text(check.StreamRetry(method, m.Kind.describe())), ": remove its retry")
			}
		}
		if m.Breaker != nil {
			m.Breaker.check(f+".Breaker", r)
		}
		if m.Bulkhead != nil {
			m.Bulkhead.check(f+".Bulkhead", r)
		}
		checkPriority(m.Priority, f+".Priority", r)
		if m.Kind == KindUnary && m.Timeout >= 0 && (m.AdaptiveLimit != nil || p.AdaptiveLimit != nil) {
			r.pair(f+".AdaptiveLimit", "", []string{f + ".Timeout"}, check.AdaptiveTimeout(method, m.Timeout), "; set {Timeout}, or remove the adaptive limit")
			r.pair(f+".AdaptiveLimit", "", []string{f + ".Timeout", f + ".OverallTimeout"}, check.AdaptiveOverall(method, m.Timeout, m.OverallTimeout), "; shorten {Timeout} below {OverallTimeout} or lengthen {OverallTimeout}, or remove the adaptive limit")
		}
		m.checkPatterns(f, r)
		m.checkAdaptive(f, p, r)
	}
	return out
}

// GroupProblems returns the problems of one group of a policy on its
// own: g is one of *Retry, *Budget, *Breaker, *Bulkhead, *RateLimit,
// *Hedging, *Cache, *AdaptiveLimit, *Throttle, *Shedding or *Dedup, or a
// *Method or *ServerMethod for the values outside any group (a method's
// timeouts, keys and priority; a server method's min_deadline and
// default_timeout); none for anything else. The values are read as an
// options author writes them: a zero is a written 0, never none or a
// default, which the options say by leaving the value out. Key is the
// problem's path inside the group ("cool_down"), and so are the keys of With. It is how the options
// boundaries (internal/rules: the plugin, the lint plugin, the override
// loader) refuse a value with the very checks Validate makes, so that the
// check of a field is written once, here.
func GroupProblems(g any) []Problem {
	var out []Problem
	r := &reporter{add: func(pr Problem) { out = append(out, pr) }, written: true}
	if c, ok := g.(groupChecker); ok {
		c.check(reflect.TypeOf(g).Elem().Name(), r)
	}
	for i := range out {
		_, out[i].Key, _ = strings.Cut(out[i].Key, ".")
		for j := range out[i].With {
			_, out[i].With[j], _ = strings.Cut(out[i].With[j], ".")
		}
	}
	return out
}

// groupChecker is a value GroupProblems checks: each group of a policy,
// and a method's or a server method's own values outside its groups.
type groupChecker interface {
	check(field string, r *reporter)
}

func (p *AdaptiveLimit) check(f string, r *reporter) { checkAdaptive(f, p, nil, r) }
func (p *Throttle) check(f string, r *reporter)      { checkThrottle(f, p, r) }

// check checks the method's own values, outside its groups.
func (m *Method) check(f string, r *reporter) {
	m.checkTimeouts(f, r)
	m.checkKeys(f, r)
	checkPriority(m.Priority, f+".Priority", r)
}

func (m *ServerMethod) check(f string, r *reporter) { m.checkDeadlines(f, r) }

// reporter receives the problems of the checks below.
type reporter struct {
	add func(Problem)
	// method is the method being checked, "" for the service.
	method string
	// written reads the values as an options author writes them
	// (GroupProblems): a zero is a value, not none or a default.
	written bool
}

// core is the core of a message from package check, in words for each
// reader: check.Words, for one that names another value, or text.
type core interface {
	Go() string
	Options() string
}

// text is a core that names no value, read alike by both authors and as
// written: the values formatted into it (a method's name, a header) may
// hold anything, a brace included.
type text string

func (t text) Go() string      { return string(t) }
func (t text) Options() string { return string(t) }

// report reports c, the core of a message from package check, at field,
// after subject (the value it is about, for a problem of two values,
// "{MaxBackoff}"; "" for none) and followed by fix, how to mend it, all
// three in words for each reader; nothing when c is "". unset is what
// leaving the value out stands for (Problem.Unset). with names the Go
// paths of the other values the problem relates (Problem.With), none for
// a problem of one value.
func (r *reporter) report(field string, subject words, c core, fix, unset words, pair bool, with ...string) {
	goCore, optionsCore := c.Go(), c.Options()
	if goCore == "" {
		return
	}
	message := func(subject, what, fix string) string {
		if subject != "" {
			return subject + " " + what + fix
		}
		return what + fix
	}
	var keys []string
	for _, w := range with {
		keys = append(keys, optionKey(w))
	}
	r.add(Problem{
		Field: field, Method: r.method, Key: optionKey(field),
		Message:        message(subject.Go(), goCore, fix.Go()),
		OptionsMessage: message(subject.Options(), optionsCore, fix.Options()),
		Core:           optionsCore, Unset: unset.Options(), Pair: pair, With: keys,
	})
}

// bad reports a problem of one value with no mend apart for a Go author.
func (r *reporter) bad(field, format string, args ...any) {
	r.report(field, "", text(fmt.Sprintf(format, args...)), "", "", false)
}

// fail reports problem, the core of a message from package check that
// names no other value (text), at field, followed by fix (how to mend
// it, "" for nothing more). A core that names one (check.Words) is
// report's.
func (r *reporter) fail(field, problem string, fix words) {
	r.report(field, "", text(problem), fix, "", false)
}

// pair reports a problem of two values, or of a value and the method it
// is set on, at field: subject names the value blamed ("{MaxBackoff}"),
// with the Go paths of the other values it relates (nil for none but the
// kind of the method), so that the override loader can report it at the
// key of either.
func (r *reporter) pair(field string, subject words, with []string, problem core, fix words) {
	r.report(field, subject, problem, fix, "", true, with...)
}

// given reports whether a value whose zero means none or a default is
// given: in Go, when it is not zero; written, always.
func (r *reporter) given(notZero bool) bool { return notZero || r.written }

// noneAtZero checks a duration whose zero means none or a default: in Go
// any duration not negative (0 is none, followed by unset in a mend); as
// written in the options, a positive one, since leaving it out says none
// there. unset is what leaving it out stands for ("for no per-attempt
// limit"), "" for a value the options contract gives a default of its own.
func (r *reporter) noneAtZero(field string, d time.Duration, unset words) {
	if r.written {
		r.report(field, "", text(check.Positive(d)), "", unset, false)
		return
	}
	var fix words
	if unset != "" {
		fix = "; use 0 " + unset
	}
	r.fail(field, check.NotNegative(d), fix)
}

// checkTimeouts checks a method's timeout and overall timeout, each on
// its own and together.
func (m *Method) checkTimeouts(f string, r *reporter) {
	r.noneAtZero(f+".Timeout", m.Timeout, "for no per-attempt limit")
	r.noneAtZero(f+".OverallTimeout", m.OverallTimeout, "for no limit of the whole call")
	// The pairs name their subject: the override loader reports them
	// at the key of either value.
	r.pair(f+".Timeout", "{Timeout}", []string{f + ".OverallTimeout"}, check.Timeout(m.Timeout, m.OverallTimeout, ""), "; shorten {Timeout} or lengthen {OverallTimeout}")
}

// checkKeys refuses a generated idempotency key beside a named one.
func (m *Method) checkKeys(f string, r *reporter) {
	if m.GenerateIdempotencyKey {
		r.fail(f+".GenerateIdempotencyKey", withHint(check.KeyTwice(m.IdempotencyKey, true), ": set one or the other"), "")
	}
}

// withHint appends to problem a hint that holds for every boundary; ""
// for no problem.
func withHint(problem, hint string) string {
	if problem == "" {
		return ""
	}
	return problem + hint
}

// optionKey turns the Go path of a field ("Methods[0] (/p.S/Get).Retry.MaxBackoff",
// "Breaker.CoolDown") into its path in the options ("retry.max_backoff",
// "circuit_breaker.cool_down"), without the method. A struct held by
// value (a Shedding's Limits) has no key of its own: the options write
// its fields in the group ("shedding.low").
func optionKey(field string) string {
	if i := strings.Index(field, ")."); strings.HasPrefix(field, "Methods[") && i >= 0 {
		field = field[i+2:]
	}
	return check.OptionPath(field)
}

// codeList reports the problems of a list of status codes held as a set.
// The options write a list element by element, and their boundaries
// check it at each index (internal/rules).
func codeList(r *reporter, field string, l check.List, s CodeSet) {
	// A number gRPC defines no code for cannot be written in a .proto or
	// an override, which name the codes.
	if u := s &^ CodeSet(1<<(codes.Unauthenticated+1)-1); u != 0 {
		r.bad(field, "holds %s, numbers gRPC defines no code for: name the codes (codes.Unavailable)", u)
	}
	for _, msg := range check.Codes(l, s.Codes()) {
		r.bad(field, "%s", msg)
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

func positive(d time.Duration, field string, r *reporter) {
	r.fail(field, check.Positive(d), "")
}

func ratio(x float64, field string, r *reporter) {
	r.fail(field, check.Ratio(x), "")
}

func (p *Retry) check(f string, r *reporter) {
	r.fail(f+".MaxAttempts", check.MaxAttempts(int64(p.MaxAttempts)), "")
	positive(p.InitialBackoff, f+".InitialBackoff", r)
	positive(p.MaxBackoff, f+".MaxBackoff", r)
	r.pair(f+".MaxBackoff", "{MaxBackoff}", []string{f + ".InitialBackoff"}, check.MaxBackoff(p.InitialBackoff, p.MaxBackoff, ""), "")
	r.fail(f+".Multiplier", check.Multiplier(p.Multiplier), "")
	codeList(r, f+".RetryableCodes", check.Retryable, p.RetryableCodes)
}

func (b *Budget) check(f string, r *reporter) {
	ratio(b.Ratio, f+".Ratio", r)
	if b.MinRetries < 0 {
		r.bad(f+".MinRetries", "must not be negative, got %d", b.MinRetries)
	}
	positive(b.Window, f+".Window", r)
}

func (b *Breaker) check(f string, r *reporter) {
	ratio(b.FailureRatio, f+".FailureRatio", r)
	r.fail(f+".MinimumCalls", check.AtLeastOne(int64(b.MinimumCalls)), "")
	b.checkWindow(f, r)
	positive(b.CoolDown, f+".CoolDown", r)
	r.fail(f+".HalfOpenProbes", check.Probes(int64(b.HalfOpenProbes)), "")
	r.noneAtZero(f+".SlowCallThreshold", b.SlowCallThreshold, "to count no call as slow")
	if b.FailureCodes == 0 {
		// Only in Go: an options list left empty takes the default.
		r.bad(f+".FailureCodes", "is empty: the breaker could never open; list the codes that count as failures, as in [UNAVAILABLE, DEADLINE_EXCEEDED]")
	}
	codeList(r, f+".FailureCodes", check.Failure, b.FailureCodes)
}

func (b *Bulkhead) check(f string, r *reporter) {
	r.fail(f+".Permits", withHint(check.AtLeastOne(int64(b.Permits)), ": it is the number of calls allowed in flight at once"), "")
	r.fail(f+".MaxWait", withHint(check.NotNegative(b.MaxWait), "; use 0 to refuse a call at once when every permit is taken"), "")
}

// checkPatterns checks hedging, the rate limit, the cache and
// idempotency keys, generated or named.
func (m *Method) checkPatterns(f string, r *reporter) {
	name, kind := shortName(m.Name), m.Kind.describe()
	if m.GenerateIdempotencyKey {
		m.checkKeys(f, r)
		r.pair(f+".GenerateIdempotencyKey", "", nil, text(check.StreamKey(name, kind)), ": remove it")
	}
	if m.IdempotencyKey != "" {
		// A stream's handle reads no key: one named here would silently
		// never be sent.
		r.pair(f+".IdempotencyKey", "", nil, text(check.StreamKey(name, kind)), ": remove it")
	}
	if h := m.Hedging; h != nil {
		h.check(f+".Hedging", r)
		r.pair(f+".Hedging", "", []string{f + ".Idempotent"}, text(check.HedgingIdempotent(name, m.Idempotent)), ": remove hedging")
		r.pair(f+".Hedging", "", nil, text(check.StreamHedging(name, kind)), ": remove hedging")
		r.pair(f+".Hedging", "", []string{f + ".Retry"}, text(check.HedgingRetries(name, m.Retry != nil && m.Retry.MaxAttempts > 1, "")), "; remove one, or turn retries off for it with {Retry.MaxAttempts: 1}")
		r.pair(f+".Hedging.Delay", "", []string{f + ".Timeout", f + ".OverallTimeout"}, check.HedgingDelay(h.Delay, m.Timeout, m.OverallTimeout, "", ""), "")
	}
	if m.RateLimit != nil {
		m.RateLimit.check(f+".RateLimit", r)
		if m.Kind != KindUnary {
			r.pair(f+".RateLimit", "", nil, text(fmt.Sprintf("opening a stream takes no token, and %s is a streaming method: remove its rate limit", name)), "")
		}
	}
	if c := m.Cache; c != nil {
		c.check(f+".Cache", r)
		r.pair(f+".Cache", "", []string{f + ".Idempotent"}, text(check.CacheIdempotent(name, m.Idempotent)), "; remove cache")
		r.pair(f+".Cache", "", nil, text(check.StreamCache(name, kind)), ": remove cache")
		r.pair(f+".Cache", "", []string{f + ".Timeout", f + ".OverallTimeout"}, check.CacheTimeout(name, m.Timeout, m.OverallTimeout), "")
	}
}

// shortName is a method's name without its service: "/pkg.S/Get" → "Get".
func shortName(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}

// checkWindow checks the breaker's window: a duration, or a number of calls
// that MinimumCalls can reach. Written in the options, both are checked:
// window_calls beside window is refused there (internal/rules).
func (b *Breaker) checkWindow(f string, r *reporter) {
	if b.WindowCalls == 0 || r.written {
		positive(b.Window, f+".Window", r)
	}
	if !r.given(b.WindowCalls != 0) {
		return
	}
	if msg := check.WindowCalls(int64(b.WindowCalls)); msg != "" {
		r.report(f+".WindowCalls", "", text(msg), "; use 0 for a window in time", "for a window in time", false)
		return
	}
	r.pair(f+".MinimumCalls", "", []string{f + ".WindowCalls"}, text(check.MinimumAboveWindow(int64(b.WindowCalls), int64(b.MinimumCalls))), "")
}
