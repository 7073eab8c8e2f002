// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rules holds the checks of a resilient.v1.Policy and the defaults
// of the options contract, shared by the plugin (which reports a problem at
// its place in the .proto), the buf check plugin (which reports it as a
// lint rule, lint.go) and the override loader (which reports it at its key
// in the file or environment). One implementation, so that lint refuses
// what the plugin refuses, and an operator can never set through an
// override what the plugin refuses in a .proto. What is wrong with a value
// is said by internal/check, which the runtime's Go validator uses too
// (runtime/policy); this package adds how an options author mends it.
package rules

import (
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/internal/contract"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// The defaults of the options contract (options/resilient/v1/resilient.proto).
const (
	DefaultMaxAttempts    = 3
	DefaultInitialBackoff = 50 * time.Millisecond
	DefaultMaxBackoff     = time.Second
	DefaultMultiplier     = 2.0

	DefaultBudgetRatio      = contract.BudgetRatio
	DefaultBudgetMinRetries = contract.BudgetMinRetries
	DefaultBudgetWindow     = contract.BudgetWindow

	DefaultFailureRatio   = 0.5
	DefaultMinimumCalls   = 20
	DefaultBreakerWindow  = 10 * time.Second
	DefaultCoolDown       = 10 * time.Second
	DefaultHalfOpenProbes = 3

	DefaultHedgingMaxCopies = 2
	DefaultCacheMaxEntries  = 10000

	DefaultShedPushback = contract.ShedPushback
	DefaultLease        = contract.Lease
)

// DefaultBurst is the burst of a rate limit that sets none: its rate
// rounded up, at least 1 and at most math.MaxInt32; 1 for a rate that is
// not positive and finite (which Check refuses).
func DefaultBurst(requestsPerSecond float64) int {
	if x := requestsPerSecond; x > 0 && !math.IsInf(x, 0) {
		return int(max(1, min(math.Ceil(x), math.MaxInt32)))
	}
	return 1
}

// DefaultSheddingCode is the status code of a shedding refusal that sets
// none.
const DefaultSheddingCode = codes.Unavailable

// The default status code lists of the options contract, from its table
// of defaults (resolve.go). Callers must not change them.
var (
	DefaultRetryableCodes = CodesOf(defaults.GetRetry().GetRetryableCodes(), nil)
	DefaultFailureCodes   = CodesOf(defaults.GetCircuitBreaker().GetFailureCodes(), nil)
	DefaultNonFatalCodes  = CodesOf(defaults.GetHedging().GetNonFatalCodes(), nil)
)

// Report receives one problem: the field path inside the policy
// ("retry.max_attempts") and what is wrong and how to mend it.
type Report func(path, format string, args ...any)

// Check checks the values written in one policy, each on its own (the
// checks that involve several levels or the method's descriptor are
// CheckService, CheckMethod and CheckShedding). onMethod says whether the policy applies to a single method
// (a (resilient.v1.method) option, or an override of one method).
func Check(p *resilientv1.Policy, onMethod bool, add Report) {
	if p == nil {
		return
	}
	c := checker{add: add}
	c.positive("timeout", p.GetTimeout(), "remove it for no per-attempt limit")
	c.positive("overall_timeout", p.GetOverallTimeout(), "remove it for no limit of the whole call")
	if r := p.GetRetry(); r != nil {
		if r.MaxAttempts != nil {
			c.fail("retry.max_attempts", check.MaxAttempts(int64(r.GetMaxAttempts())), fmt.Sprintf("remove it for the default %d", DefaultMaxAttempts))
		}
		c.positive("retry.initial_backoff", r.GetInitialBackoff(), fmt.Sprintf("remove it for the default %v", DefaultInitialBackoff))
		c.positive("retry.max_backoff", r.GetMaxBackoff(), fmt.Sprintf("remove it for the default %v", DefaultMaxBackoff))
		if r.BackoffMultiplier != nil {
			c.fail("retry.backoff_multiplier", check.Multiplier(r.GetBackoffMultiplier()), fmt.Sprintf("remove it for the default %v", DefaultMultiplier))
		}
		c.codes("retry.retryable_codes", r.GetRetryableCodes(), check.Retryable)
	}
	if b := p.GetRetryBudget(); b != nil {
		if onMethod {
			c.add("retry_budget", "retry_budget is shared by the whole dependency: set it on the service or the file")
		} else {
			c.ratio("retry_budget.ratio", b.Ratio, DefaultBudgetRatio)
			c.positive("retry_budget.window", b.GetWindow(), fmt.Sprintf("remove it for the default %v", DefaultBudgetWindow))
		}
	}
	if cb := p.GetCircuitBreaker(); cb != nil {
		c.ratio("circuit_breaker.failure_ratio", cb.FailureRatio, DefaultFailureRatio)
		c.atLeastOne("circuit_breaker.minimum_calls", cb.MinimumCalls, fmt.Sprintf("remove it for the default %d", DefaultMinimumCalls))
		c.positive("circuit_breaker.window", cb.GetWindow(), fmt.Sprintf("remove it for the default %v", DefaultBreakerWindow))
		c.positive("circuit_breaker.cool_down", cb.GetCoolDown(), fmt.Sprintf("remove it for the default %v", DefaultCoolDown))
		if cb.HalfOpenProbes != nil {
			c.fail("circuit_breaker.half_open_probes", check.Probes(int64(cb.GetHalfOpenProbes())), fmt.Sprintf("remove it for the default %d", DefaultHalfOpenProbes))
		}
		c.positive("circuit_breaker.slow_call_threshold", cb.GetSlowCallThreshold(), "remove it to count no call as slow")
		c.codes("circuit_breaker.failure_codes", cb.GetFailureCodes(), check.Failure)
		if cb.PerMethod != nil && !onMethod {
			c.add("circuit_breaker.per_method", "per_method is only meaningful on a method: remove it here, and set circuit_breaker: {per_method: true} on each method that needs a breaker of its own")
		}
	}
	c.priority(p)
	if sv := p.GetServer(); sv != nil {
		c.positive("server.min_deadline", sv.GetMinDeadline(), "remove it to refuse only the requests whose deadline has passed")
		c.positive("server.default_timeout", sv.GetDefaultTimeout(), "remove it to leave a request without deadline unbounded")
		if d := sv.GetDedup(); d != nil {
			c.positive("server.dedup.ttl", d.GetTtl(), "it is how long a result is kept and replayed, as in dedup: {ttl: {seconds: 86400}}")
			c.positive("server.dedup.lease", d.GetLease(), fmt.Sprintf("remove it for the default %v", DefaultLease))
			if v := d.GetOnStoreError(); resilientv1.OnStoreError_name[int32(v)] == "" {
				c.add("server.dedup.on_store_error", "unknown value %d: write ON_STORE_ERROR_REFUSE or ON_STORE_ERROR_RUN_WITHOUT_DEDUP", int32(v))
			}
		}
	}
	if sh := p.GetShedding(); sh != nil {
		if onMethod {
			c.add("shedding", "shedding limits the requests in flight of the whole service: set it on the service or the file, and give the method a priority instead")
		} else {
			for _, l := range []struct {
				name string
				v    *uint32
			}{{"low", sh.Low}, {"normal", sh.Normal}, {"high", sh.High}, {"critical", sh.Critical}} {
				c.atLeastOne("shedding."+l.name, l.v, "it is the number of requests in flight from which "+l.name+"-priority requests are refused")
			}
			c.positive("shedding.pushback", sh.GetPushback(), fmt.Sprintf("remove it for the default %v", DefaultShedPushback))
			if sh.Code != nil {
				if msg := check.SheddingCode(sh.GetCode()); msg != "" {
					c.add("shedding.code", `%s; remove it for the default "UNAVAILABLE"`, msg)
				}
			}
		}
	}
	c.patterns(p, onMethod)
	c.adaptive(p, onMethod)
	if bh := p.GetBulkhead(); bh != nil {
		c.atLeastOne("bulkhead.permits", bh.Permits, "it is the number of calls allowed in flight at once")
		c.duration("bulkhead.max_wait", bh.GetMaxWait(), true, "use 0 (or remove it) to refuse a call at once when every permit is taken")
		if bh.PerMethod != nil && !onMethod {
			c.add("bulkhead.per_method", "per_method is only meaningful on a method: remove it here, and set bulkhead: {per_method: true, permits: N} on each method that needs a bulkhead of its own")
		}
	}
}

type checker struct{ add Report }

// patterns checks the values of hedging, rate_limit, cache and
// generate_idempotency_key written in one policy.
func (c checker) patterns(p *resilientv1.Policy, onMethod bool) {
	if h := p.GetHedging(); h != nil {
		if !onMethod {
			c.add("hedging", "hedging is decided method by method, for idempotent reads with a long latency tail: move it to the (resilient.v1.method) of each such method")
		} else {
			c.positive("hedging.delay", h.GetDelay(), "a good value is the method's observed p95, as in hedging: {delay: {nanos: 80000000}}")
			if h.MaxCopies != nil {
				c.fail("hedging.max_copies", check.MaxCopies(int64(h.GetMaxCopies())), fmt.Sprintf("remove it for the default %d", DefaultHedgingMaxCopies))
			}
			c.codes("hedging.non_fatal_codes", h.GetNonFatalCodes(), check.NonFatal)
		}
	}
	if r := p.GetRateLimit(); r != nil {
		if r.RequestsPerSecond != nil {
			if msg := check.Rate(r.GetRequestsPerSecond()); msg != "" {
				c.add("rate_limit.requests_per_second", "%s, as in rate_limit: {requests_per_second: 200}", msg)
			}
		}
		c.atLeastOne("rate_limit.burst", r.Burst, "remove it for the default, requests_per_second rounded up")
		c.duration("rate_limit.max_wait", r.GetMaxWait(), true, "use 0 (or remove it) to refuse a call at once when no token is left")
		if r.PerMethod != nil && !onMethod {
			c.add("rate_limit.per_method", "per_method is only meaningful on a method: remove it here, and set rate_limit: {per_method: true, requests_per_second: N} on each method that needs a limit of its own")
		}
	}
	if ca := p.GetCache(); ca != nil {
		if !onMethod {
			c.add("cache", "a cache is keyed by the fields of one method's request: move it to the (resilient.v1.method) of each cached method")
		} else {
			c.positive("cache.fresh_ttl", ca.GetFreshTtl(), "it is how long an answer is served without calling, as in cache: {fresh_ttl: {seconds: 1}}")
			c.positive("cache.stale_ttl", ca.GetStaleTtl(), "remove it for no stale answers (the default, equal to fresh_ttl)")
			if f, st := ca.GetFreshTtl(), ca.GetStaleTtl(); f != nil && st != nil && st.AsDuration() > 0 {
				c.fail("cache.stale_ttl", check.StaleTTL(f.AsDuration(), st.AsDuration()), "raise stale_ttl, or remove it for no stale answers")
			}
			c.atLeastOne("cache.max_entries", ca.MaxEntries, fmt.Sprintf("remove it for the default %d", DefaultCacheMaxEntries))
			seen := map[string]bool{}
			for i, k := range ca.GetKeyFields() {
				if seen[k] {
					c.add(fmt.Sprintf("cache.key_fields[%d]", i), "%q is listed twice: remove the repeat", k)
				}
				seen[k] = true
			}
		}
	}
	if msg := check.KeyTwice(p.GetIdempotencyKey(), p.GetGenerateIdempotencyKey()); msg != "" {
		c.add("generate_idempotency_key", "%s: remove generate_idempotency_key, or idempotency_key", msg)
	}
}

// priority refuses a priority number the contract does not define.
func (c checker) priority(p *resilientv1.Policy) {
	if v := p.GetPriority(); resilientv1.Priority_name[int32(v)] == "" {
		c.add("priority", "unknown priority %d: write PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_HIGH or PRIORITY_CRITICAL", int32(v))
	}
}

// SheddingLimits checks the four limits of a resolved shedding policy
// together: every one set, and none below the limit of a lower priority.
// add receives the field that is wrong.
func SheddingLimits(low, normal, high, critical *uint32, add Report) {
	sheddingLimits(low, normal, high, critical, add, add)
}

// sheddingLimits is SheddingLimits, reporting a limit left unset to
// missing and one below a lower priority's to order.
func sheddingLimits(low, normal, high, critical *uint32, missing, order Report) {
	prev, prevName := uint32(0), ""
	for _, l := range []struct {
		name string
		v    *uint32
	}{{"low", low}, {"normal", normal}, {"high", high}, {"critical", critical}} {
		switch {
		case l.v == nil:
			missing("shedding."+l.name, "is required: set the in-flight limit of every priority, as in shedding: {low: 50, normal: 150, high: 180, critical: 200}")
			continue
		case *l.v < prev:
			order("shedding."+l.name, "%s; raise %s or lower %s", check.SheddingBelow(int64(*l.v), int64(prev), prevName), l.name, prevName)
		}
		if *l.v >= prev {
			prev, prevName = *l.v, l.name
		}
	}
}

func (c checker) positive(path string, d *durationpb.Duration, fix string) {
	c.duration(path, d, false, fix)
}

// maxSeconds is the longest whole number of seconds a time.Duration holds.
const maxSeconds = math.MaxInt64/int64(time.Second) - 1

// duration checks that d is a valid Duration that fits a time.Duration and
// is positive (or, with zeroOK, not negative).
func (c checker) duration(path string, d *durationpb.Duration, zeroOK bool, fix string) {
	if d == nil || !c.validDuration(path, d) {
		return
	}
	if zeroOK {
		c.fail(path, check.NotNegative(d.AsDuration()), fix)
	} else {
		c.fail(path, check.Positive(d.AsDuration()), fix)
	}
}

// validDuration reports whether d is a valid Duration that fits a
// time.Duration, refusing it at path when not.
func (c checker) validDuration(path string, d *durationpb.Duration) bool {
	s, n := d.GetSeconds(), d.GetNanos()
	switch {
	case n <= -1e9 || n >= 1e9:
		c.add(path, "is not a valid duration: nanos %d must lie within ±999999999; carry whole seconds into seconds, as in {seconds: 1, nanos: 500000000} for 1.5s", n)
	case (s > 0 && n < 0) || (s < 0 && n > 0):
		c.add(path, "is not a valid duration: seconds %d and nanos %d must have the same sign", s, n)
	case s > maxSeconds || s < -maxSeconds:
		c.add(path, "is not a valid duration: %d seconds is more than a Go time.Duration holds (about 292 years)", s)
	default:
		return true
	}
	return false
}

// fail reports problem, the core of a message from package check, at
// path with how an options author mends it; nothing when problem is "".
func (c checker) fail(path, problem, fix string) {
	if problem != "" {
		c.add(path, "%s; %s", problem, fix)
	}
}

func (c checker) ratio(path string, r *float64, def float64) {
	if r != nil {
		c.fail(path, check.Ratio(*r), fmt.Sprintf("remove it for the default %v", def))
	}
}

func (c checker) atLeastOne(path string, n *uint32, fix string) {
	if n != nil {
		c.fail(path, check.AtLeastOne(int64(*n)), fix)
	}
}

// codes checks a list of status code names, each at its index.
func (c checker) codes(path string, names []string, list check.List) {
	for i, name := range names {
		p := fmt.Sprintf("%s[%d]", path, i)
		code, ok := ParseCode(name)
		if !ok {
			c.add(p, "unknown status code %q: %s", name, suggestCode(name))
		} else if msg := check.Code(list, code); msg != "" {
			c.add(p, "%s", msg)
		}
	}
}

// ParseCode returns the code of a canonical name, as the runtime parses it,
// "OK" included, so that it can be refused with its own reason.
func ParseCode(name string) (codes.Code, bool) { return codename.Parse(name) }

// CodesOf parses checked code names, dropping repeats; none gives def.
func CodesOf(names []string, def []codes.Code) []codes.Code {
	if len(names) == 0 {
		return def
	}
	var out []codes.Code
	seen := map[codes.Code]bool{}
	for _, n := range names {
		if c, ok := ParseCode(n); ok && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// suggestCode says how to write a code name that was not recognised.
func suggestCode(name string) string {
	norm := func(s string) string {
		s = strings.ToUpper(s)
		s = strings.NewReplacer("_", "", "-", "", " ", "", "CANCELLED", "CANCELED").Replace(s)
		return s
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if canon := codename.Of(c); norm(name) == norm(canon) {
			return fmt.Sprintf("did you mean %q? Codes are written by their canonical upper-case name", canon)
		}
	}
	return `write a canonical upper-case gRPC code name, such as "UNAVAILABLE" or "DEADLINE_EXCEEDED"`
}
