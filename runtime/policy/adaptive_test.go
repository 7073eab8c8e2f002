package policy_test

import (
	"testing"

	"github.com/go-resilient/resilient/internal/rules"
	"github.com/go-resilient/resilient/runtime/internal/adaptive"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAdaptiveDefaultsAgree: the contract's defaults of the adaptive layers
// (internal/rules, which the plugin writes into the literal) are the
// runtime's, which a zero field of a policy built in Go stands for.
func TestAdaptiveDefaultsAgree(t *testing.T) {
	a := policy.DefaultAdaptiveLimit
	if a.MinLimit != rules.DefaultMinLimit || a.MaxLimit != rules.DefaultMaxLimit || a.InitialLimit != rules.DefaultInitialLimit ||
		a.Tolerance != rules.DefaultTolerance || a.Smoothing != rules.DefaultSmoothing || a.BaselineWindow != rules.DefaultBaselineWindow {
		t.Errorf("policy.DefaultAdaptiveLimit %+v differs from the contract's defaults", a)
	}
	th := policy.DefaultThrottle
	if th.K != rules.DefaultThrottleK || th.Window != rules.DefaultThrottleWindow || th.MaxRefusal != rules.DefaultThrottleMaxRefusal {
		t.Errorf("policy.DefaultThrottle %+v differs from the contract's defaults", th)
	}
}

// TestAdaptiveLimitResolvedUnderTheBulkhead: the defaults of max_limit and
// initial_limit follow the bulkhead's permits, as the runtime's
// WithCeiling does, so that the literal shows the values in force.
func TestAdaptiveLimitResolvedUnderTheBulkhead(t *testing.T) {
	for _, tc := range []struct {
		permits         uint32
		lo, hi, initial int
	}{
		{0, 1, 100, 20},
		{8, 1, 8, 8},
		{50, 1, 50, 20},
	} {
		p := adaptive.Policy{}.WithCeiling(int(tc.permits))
		lo, hi, initial := rules.AdaptiveLimitOf(nil, tc.permits)
		if lo != tc.lo || hi != tc.hi || initial != tc.initial {
			t.Errorf("under %d permits: %d..%d from %d, want %d..%d from %d", tc.permits, lo, hi, initial, tc.lo, tc.hi, tc.initial)
		}
		if p.MaxLimit != 0 && p.MaxLimit != hi {
			t.Errorf("under %d permits the runtime's ceiling is %d, the plugin's %d", tc.permits, p.MaxLimit, hi)
		}
	}
}
