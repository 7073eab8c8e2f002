package runtime

import (
	"fmt"
	"strings"

	"github.com/go-resilient/resilient/runtime/policy"
)

// describe renders the policy as text, one method per paragraph, so an
// operator can see what is in force: every timeout, retry, breaker,
// bulkhead and budget setting, and which of them the methods share.
func describe(p *policy.Service) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", p.Name)
	if bp := p.BudgetInForce(); bp != nil {
		fmt.Fprintf(&b, "  retry budget: %s\n", describeBudget(bp))
	}
	if p.Breaker != nil {
		fmt.Fprintf(&b, "  breaker (shared): %s\n", describeBreaker(p.Breaker))
	}
	if p.Bulkhead != nil {
		fmt.Fprintf(&b, "  bulkhead (shared): %s\n", describeBulkhead(p.Bulkhead))
	}
	if p.RateLimit != nil {
		fmt.Fprintf(&b, "  rate limit (shared): %s\n", describeRateLimit(p.RateLimit))
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
		if m.Priority != policy.PriorityUnspecified {
			fmt.Fprintf(&b, ", priority: %s", m.Priority)
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "    timeout: %s, overall: %s\n", orNone(m.Timeout.String(), m.Timeout == 0), orNone(m.OverallTimeout.String(), m.OverallTimeout == 0))
		if m.Retry != nil && m.Retry.MaxAttempts > 1 {
			fmt.Fprintf(&b, "    retry: %s\n", describeRetry(m.Retry))
		} else {
			b.WriteString("    retry: none\n")
		}
		switch {
		case m.Breaker != nil:
			fmt.Fprintf(&b, "    breaker (own): %s\n", describeBreaker(m.Breaker))
		case p.Breaker != nil:
			b.WriteString("    breaker: shared\n")
		default:
			b.WriteString("    breaker: none\n")
		}
		switch {
		case m.Bulkhead != nil:
			fmt.Fprintf(&b, "    bulkhead (own): %s\n", describeBulkhead(m.Bulkhead))
		case p.Bulkhead != nil:
			b.WriteString("    bulkhead: shared\n")
		default:
			b.WriteString("    bulkhead: none\n")
		}
		// The newer patterns are listed only where they apply, so that the
		// description of a policy without them reads as before.
		if m.Hedging != nil {
			fmt.Fprintf(&b, "    hedging: %s\n", describeHedging(m.Hedging))
		}
		switch {
		case m.Kind != policy.KindUnary: // opening a stream takes no token
		case m.RateLimit != nil:
			fmt.Fprintf(&b, "    rate limit (own): %s\n", describeRateLimit(m.RateLimit))
		case p.RateLimit != nil:
			b.WriteString("    rate limit: shared\n")
		}
		if m.Cache != nil {
			fmt.Fprintf(&b, "    cache: %s\n", describeCache(m.Cache))
		}
		switch {
		case m.Kind != policy.KindUnary:
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

func describeRetry(r *policy.Retry) string {
	return fmt.Sprintf("%d attempts, backoff %s..%s ×%g with full jitter, on %s",
		r.MaxAttempts, r.InitialBackoff, r.MaxBackoff, r.Multiplier, r.RetryableCodes)
}

func describeBudget(b *policy.Budget) string {
	return fmt.Sprintf("%g of requests + %d per %s", b.Ratio, b.MinRetries, b.Window)
}

func describeBreaker(b *policy.Breaker) string {
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

func describeBulkhead(b *policy.Bulkhead) string {
	return fmt.Sprintf("%d permits, max wait %s", b.Permits, b.MaxWait)
}

func describeCache(p *policy.Cache) string {
	return fmt.Sprintf("fresh %s, stale %s, %d entries, key %s", p.FreshTTL, p.StaleTTL, p.MaxEntries, strings.Join(p.KeyFields, ", "))
}

func describeHedging(h *policy.Hedging) string {
	return fmt.Sprintf("%d copies %s apart, non-fatal %s", h.MaxCopies, h.Delay, h.NonFatalCodes)
}

func describeRateLimit(r *policy.RateLimit) string {
	return fmt.Sprintf("%g/s, burst %d, max wait %s", r.RequestsPerSecond, r.Burst, r.MaxWait)
}
