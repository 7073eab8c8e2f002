package runtime

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
)

// Validate checks that the policy can be applied: names set, counts and
// durations positive, ratios in (0, 1], retries only on methods that may be
// repeated. The plugin refuses the same mistakes in the .proto, with their
// position; Validate guards policies built or changed in Go. The error
// names every field that is wrong.
func (p *ServicePolicy) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("resilient: policy %s: %s: %s", p.Name, field, fmt.Sprintf(format, args...)))
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
		f := fmt.Sprintf("Methods[%d] (%s)", i, m.Name)
		if m.Name == "" {
			bad(f+".Name", "empty: set the full method name, /pkg.Service/Method")
		} else if seen[m.Name] {
			bad(f+".Name", "appears twice")
		}
		seen[m.Name] = true
		if m.Timeout < 0 {
			bad(f+".Timeout", "negative (%s): use 0 for none", m.Timeout)
		}
		if m.OverallTimeout < 0 {
			bad(f+".OverallTimeout", "negative (%s): use 0 for none", m.OverallTimeout)
		}
		if m.Timeout > 0 && m.OverallTimeout > 0 && m.Timeout > m.OverallTimeout {
			bad(f+".Timeout", "%s is longer than OverallTimeout %s", m.Timeout, m.OverallTimeout)
		}
		if m.Retry != nil {
			m.Retry.check(f+".Retry", bad)
			if m.Retry.MaxAttempts > 1 && !m.Idempotent && m.IdempotencyKey == "" && !m.GenerateIdempotencyKey {
				bad(f+".Retry", "the method is neither idempotent nor has an idempotency key: retrying it could repeat its effect")
			}
			if m.Retry.MaxAttempts > 1 && m.Kind != KindUnary {
				bad(f+".Retry", "streams are not retried")
			}
		}
		if m.Breaker != nil {
			m.Breaker.check(f+".Breaker", bad)
		}
		if m.Bulkhead != nil {
			m.Bulkhead.check(f+".Bulkhead", bad)
		}
		m.checkPatterns(f, bad)
		m.checkAdaptive(f, p, bad)
	}
	return errors.Join(errs...)
}

type badFunc func(field, format string, args ...any)

func positive(d time.Duration, field string, bad badFunc) {
	if d <= 0 {
		bad(field, "must be positive, is %s", d)
	}
}

func ratio(r float64, field string, bad badFunc) {
	if math.IsNaN(r) || r <= 0 || r > 1 {
		bad(field, "must be in (0, 1], is %v", r)
	}
}

func (r *RetryPolicy) check(f string, bad badFunc) {
	if r.MaxAttempts < 1 {
		bad(f+".MaxAttempts", "must be at least 1, is %d", r.MaxAttempts)
	}
	positive(r.InitialBackoff, f+".InitialBackoff", bad)
	positive(r.MaxBackoff, f+".MaxBackoff", bad)
	if r.MaxBackoff < r.InitialBackoff {
		bad(f+".MaxBackoff", "%s is less than InitialBackoff %s", r.MaxBackoff, r.InitialBackoff)
	}
	if math.IsNaN(r.Multiplier) || math.IsInf(r.Multiplier, 0) || r.Multiplier < 1 {
		bad(f+".Multiplier", "must be a finite number of at least 1, is %v", r.Multiplier)
	}
	if r.RetryableCodes.Has(0) {
		bad(f+".RetryableCodes", "holds OK")
	}
	if answers := r.RetryableCodes & answerCodes; answers != 0 {
		bad(f+".RetryableCodes", "holds %s, answers of the service and not transient failures: repeating the call cannot change them; remove them", answers)
	}
}

// answerCodes are the codes the plugin refuses as retryable: the service
// understood the request and answered it.
var answerCodes = CodesOf(codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
	codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated)

func (b *BudgetPolicy) check(f string, bad badFunc) {
	ratio(b.Ratio, f+".Ratio", bad)
	if b.MinRetries < 0 {
		bad(f+".MinRetries", "must not be negative, is %d", b.MinRetries)
	}
	positive(b.Window, f+".Window", bad)
}

func (b *BreakerPolicy) check(f string, bad badFunc) {
	ratio(b.FailureRatio, f+".FailureRatio", bad)
	if b.MinimumCalls < 1 {
		bad(f+".MinimumCalls", "must be at least 1, is %d", b.MinimumCalls)
	}
	b.checkWindow(f, bad)
	positive(b.CoolDown, f+".CoolDown", bad)
	if b.HalfOpenProbes < 1 || b.HalfOpenProbes > maxProbes {
		bad(f+".HalfOpenProbes", "must be in [1, %d], is %d", maxProbes, b.HalfOpenProbes)
	}
	if b.SlowCallThreshold < 0 {
		bad(f+".SlowCallThreshold", "negative (%s): use 0 for none", b.SlowCallThreshold)
	}
	if b.FailureCodes == 0 {
		bad(f+".FailureCodes", "empty: the breaker could never open")
	}
	if b.FailureCodes.Has(0) {
		bad(f+".FailureCodes", "holds OK")
	}
}

func (b *BulkheadPolicy) check(f string, bad badFunc) {
	if b.Permits < 1 {
		bad(f+".Permits", "must be at least 1, is %d", b.Permits)
	}
	if b.MaxWait < 0 {
		bad(f+".MaxWait", "negative (%s): use 0 to refuse at once", b.MaxWait)
	}
}

// checkPatterns checks hedging, the rate limit, the cache and generated
// idempotency keys.
func (m *MethodPolicy) checkPatterns(f string, bad badFunc) {
	if m.GenerateIdempotencyKey {
		if m.IdempotencyKey != "" {
			bad(f+".GenerateIdempotencyKey", "the method already sends the field %s as its key: set one or the other", m.IdempotencyKey)
		}
		if m.Kind != KindUnary {
			bad(f+".GenerateIdempotencyKey", "only unary calls send an idempotency key")
		}
	}
	if h := m.Hedging; h != nil {
		h.check(f+".Hedging", bad)
		if !m.Idempotent {
			bad(f+".Hedging", "the method is not idempotent: copies run at the same time, and each could apply it")
		}
		if m.Kind != KindUnary {
			bad(f+".Hedging", "streams are not hedged")
		}
		if m.Retry != nil && m.Retry.MaxAttempts > 1 {
			bad(f+".Hedging", "the method also retries: a method hedges or retries, not both")
		}
		if m.Timeout > 0 && h.Delay >= m.Timeout {
			bad(f+".Hedging.Delay", "%s is not shorter than Timeout %s: each copy would end before the next is sent", h.Delay, m.Timeout)
		}
		if m.OverallTimeout > 0 && h.Delay >= m.OverallTimeout {
			bad(f+".Hedging.Delay", "%s is not shorter than OverallTimeout %s: no copy could be sent before the call ends", h.Delay, m.OverallTimeout)
		}
	}
	if m.RateLimit != nil {
		m.RateLimit.check(f+".RateLimit", bad)
	}
	if c := m.Cache; c != nil {
		c.check(f+".Cache", bad)
		if !m.Idempotent {
			bad(f+".Cache", "the method is not idempotent: only reads are cached")
		}
		if m.Kind != KindUnary {
			bad(f+".Cache", "streams are not cached")
		}
		if m.Timeout == 0 && m.OverallTimeout == 0 {
			bad(f+".Cache", "the method has neither Timeout nor OverallTimeout: the call shared by the callers of a key runs with its own limit, and needs one")
		}
	}
}
