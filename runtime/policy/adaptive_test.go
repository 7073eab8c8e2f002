package policy_test

import (
	"math"
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/rules"
	"github.com/go-resilient/resilient/runtime/internal/adaptive"
	"github.com/go-resilient/resilient/runtime/internal/throttle"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAdaptiveDefaultsAgree: the options contract's defaults of the
// adaptive layers, as the plugin and the override loader write them into
// a policy (internal/rules' table of defaults, through rules.Fill, and
// AdaptiveLimitOf for the bounds that follow the bulkhead), are the
// runtime's, which a zero field of a policy built in Go stands for.
func TestAdaptiveDefaultsAgree(t *testing.T) {
	var a policy.AdaptiveLimit
	if err := rules.Fill(&a, rules.DefaultOf("adaptive_limit")); err != nil {
		t.Fatal(err)
	}
	_, a.MaxLimit, a.InitialLimit = rules.AdaptiveLimitOf(nil, 0)
	if a != policy.DefaultAdaptiveLimit {
		t.Errorf("the contract's adaptive limit %+v, policy.DefaultAdaptiveLimit %+v", a, policy.DefaultAdaptiveLimit)
	}
	var th policy.Throttle
	if err := rules.Fill(&th, rules.DefaultOf("client_throttle")); err != nil {
		t.Fatal(err)
	}
	if th != policy.DefaultThrottle {
		t.Errorf("the contract's throttler %+v, policy.DefaultThrottle %+v", th, policy.DefaultThrottle)
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

// TestAdaptiveProblemsAgreeWithTheLimiter: over a grid of adaptive limits,
// right and wrong, under no bulkhead and under two, Problems refuses every
// limit the runtime's limiter refuses to build (so NewClient never fails
// on a policy Validate passed), and refuses no other but a max_limit
// above the bulkhead's permits (or above the most), which the limiter
// would quietly lower to the permits.
func TestAdaptiveProblemsAgreeWithTheLimiter(t *testing.T) {
	nan := math.NaN()
	refused, stricter := 0, 0
	for _, b := range []*policy.Bulkhead{nil, {Permits: 4}, {Permits: 8}} {
		for _, lo := range []int{-1, 0, 1, 5, 150} {
			for _, hi := range []int{-1, 0, 1, 4, 6, 100, 1 << 20, 1<<20 + 1} {
				for _, initial := range []int{-1, 0, 2, 6, 200} {
					for _, tol := range []float64{0, 0.5, 1, nan} {
						for _, sm := range []float64{0, 1, 1.5, nan} {
							for _, w := range []time.Duration{0, 9, 10} {
								a := policy.AdaptiveLimit{MinLimit: lo, MaxLimit: hi, InitialLimit: initial, Tolerance: tol, Smoothing: sm, BaselineWindow: w}
								q := adaptive.Policy(a)
								if b != nil {
									q = q.WithCeiling(b.Permits)
								}
								_, err := adaptive.New(q, time.Time{})
								s := policy.Service{Name: "t.Svc", Bulkhead: b, AdaptiveLimit: &a}
								pr := s.Problems()
								switch {
								case err != nil && len(pr) == 0:
									t.Fatalf("%+v under %+v: Problems finds nothing, the limiter refuses it: %v", a, b, err)
								case err == nil && len(pr) > 0:
									for _, p := range pr {
										if b == nil || p.Field != "AdaptiveLimit.MaxLimit" {
											t.Fatalf("%+v under %+v: the limiter takes it, Problems refuses it: %+v", a, b, p)
										}
									}
									stricter++
								case err != nil:
									refused++
								}
							}
						}
					}
				}
			}
		}
	}
	if refused == 0 || stricter == 0 {
		t.Errorf("the grid refused %d limits, %d only by Problems: it no longer tests both", refused, stricter)
	}
}

// TestThrottleProblemsAgreeWithTheThrottler: over a grid of throttlers,
// Problems refuses exactly those the runtime's throttler refuses to build.
func TestThrottleProblemsAgreeWithTheThrottler(t *testing.T) {
	nan := math.NaN()
	refused := 0
	for _, k := range []float64{0, -2, 0.5, 1, 2, nan, math.Inf(1)} {
		for _, w := range []time.Duration{0, -time.Second, 9, 10, time.Minute} {
			for _, mr := range []float64{0, -0.1, 0.5, 0.99, 1, nan} {
				th := policy.Throttle{K: k, Window: w, MaxRefusal: mr}
				_, err := throttle.New(throttle.Policy(th), time.Time{}, nil)
				s := policy.Service{Name: "t.Svc", ClientThrottle: &th}
				pr := s.Problems()
				if (err != nil) != (len(pr) > 0) {
					t.Fatalf("%+v: the throttler says %v, Problems %+v", th, err, pr)
				}
				if err != nil {
					refused++
				}
			}
		}
	}
	if refused == 0 {
		t.Error("the grid refused no throttler")
	}
}
