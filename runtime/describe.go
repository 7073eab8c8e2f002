package runtime

import (
	"fmt"
	"strings"
)

// describe renders the policy as text, one method per paragraph, so an
// operator can see what is in force: every timeout, retry, breaker,
// bulkhead and budget setting, and which of them the methods share.
func describe(p *ServicePolicy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", p.Name)
	if p.Budget != nil {
		fmt.Fprintf(&b, "  retry budget: %s\n", p.Budget.describe())
	}
	if p.Breaker != nil {
		fmt.Fprintf(&b, "  breaker (shared): %s\n", p.Breaker.describe())
	}
	if p.Bulkhead != nil {
		fmt.Fprintf(&b, "  bulkhead (shared): %s\n", p.Bulkhead.describe())
	}
	if p.RateLimit != nil {
		fmt.Fprintf(&b, "  rate limit (shared): %s\n", p.RateLimit.describe())
	}
	if p.AdaptiveLimit != nil {
		fmt.Fprintf(&b, "  adaptive limit (shared): %s\n", describeLimit(p.AdaptiveLimit, p.Bulkhead))
	}
	if p.ClientThrottle != nil {
		fmt.Fprintf(&b, "  client throttle: %s\n", describeThrottle(p.ClientThrottle))
	}
	for i := range p.Methods {
		m := &p.Methods[i]
		fmt.Fprintf(&b, "  %s\n", m.Name)
		kind := [...]string{"unary", "client streaming", "server streaming", "bidi streaming"}[m.Kind&3]
		fmt.Fprintf(&b, "    %s, idempotent: %v", kind, m.Idempotent)
		if m.IdempotencyKey != "" {
			fmt.Fprintf(&b, ", idempotency key: %s", m.IdempotencyKey)
		}
		if m.GenerateIdempotencyKey {
			b.WriteString(", idempotency key: generated per call")
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "    timeout: %s, overall: %s\n", orNone(m.Timeout.String(), m.Timeout == 0), orNone(m.OverallTimeout.String(), m.OverallTimeout == 0))
		if m.Retry != nil && m.Retry.MaxAttempts > 1 {
			fmt.Fprintf(&b, "    retry: %s\n", m.Retry.describe())
		} else {
			b.WriteString("    retry: none\n")
		}
		switch {
		case m.Breaker != nil:
			fmt.Fprintf(&b, "    breaker (own): %s\n", m.Breaker.describe())
		case p.Breaker != nil:
			b.WriteString("    breaker: shared\n")
		default:
			b.WriteString("    breaker: none\n")
		}
		switch {
		case m.Bulkhead != nil:
			fmt.Fprintf(&b, "    bulkhead (own): %s\n", m.Bulkhead.describe())
		case p.Bulkhead != nil:
			b.WriteString("    bulkhead: shared\n")
		default:
			b.WriteString("    bulkhead: none\n")
		}
		// The newer patterns are listed only where they apply, so that the
		// description of a policy without them reads as before.
		if m.Hedging != nil {
			fmt.Fprintf(&b, "    hedging: %s\n", m.Hedging.describe())
		}
		switch {
		case m.RateLimit != nil:
			fmt.Fprintf(&b, "    rate limit (own): %s\n", m.RateLimit.describe())
		case p.RateLimit != nil:
			b.WriteString("    rate limit: shared\n")
		}
		if m.Cache != nil {
			fmt.Fprintf(&b, "    cache: %s\n", m.Cache.describe())
		}
		switch {
		case m.Kind != KindUnary:
		case m.AdaptiveLimit != nil:
			bh := m.Bulkhead
			if bh == nil {
				bh = p.Bulkhead
			}
			fmt.Fprintf(&b, "    adaptive limit (own): %s\n", describeLimit(m.AdaptiveLimit, bh))
		case p.AdaptiveLimit != nil:
			b.WriteString("    adaptive limit: shared\n")
		}
	}
	return b.String()
}

// orNone is s, or "none" when none.
func orNone(s string, none bool) string {
	if none {
		return "none"
	}
	return s
}

func (r *RetryPolicy) describe() string {
	return fmt.Sprintf("%d attempts, backoff %s..%s ×%g with full jitter, on %s",
		r.MaxAttempts, r.InitialBackoff, r.MaxBackoff, r.Multiplier, r.RetryableCodes)
}

func (b *BudgetPolicy) describe() string {
	return fmt.Sprintf("%g of requests + %d per %s", b.Ratio, b.MinRetries, b.Window)
}

func (b *BreakerPolicy) describe() string {
	window := b.Window.String()
	if b.WindowCalls > 0 {
		window = fmt.Sprintf("the last %d", b.WindowCalls)
	}
	s := fmt.Sprintf("opens at %g failures over ≥%d calls in %s, cool-down %s, %d probes, failures %s",
		b.FailureRatio, b.MinimumCalls, window, b.CoolDown, b.HalfOpenProbes, b.FailureCodes)
	if b.SlowCallThreshold > 0 {
		s += fmt.Sprintf(", slower than %s counts as failure", b.SlowCallThreshold)
	}
	return s
}

func (b *BulkheadPolicy) describe() string {
	return fmt.Sprintf("%d permits, max wait %s", b.Permits, b.MaxWait)
}

func (p *CachePolicy) describe() string {
	return fmt.Sprintf("fresh %s, stale %s, %d entries, key %s", p.FreshTTL, p.StaleTTL, p.MaxEntries, strings.Join(p.KeyFields, ", "))
}

func (h *HedgingPolicy) describe() string {
	return fmt.Sprintf("%d copies %s apart, non-fatal %s", h.MaxCopies, h.Delay, h.NonFatalCodes)
}

func (r *RateLimitPolicy) describe() string {
	return fmt.Sprintf("%g/s, burst %d, max wait %s", r.RequestsPerSecond, r.Burst, r.MaxWait)
}
