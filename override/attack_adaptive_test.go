package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
)

// TestAttackAdaptiveOverridesBadValuesRefused: an override file that gives
// the adaptive layers a value that cannot work is refused by the loader,
// naming the key, never a panic, never a silent default.
func TestAttackAdaptiveOverridesBadValuesRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"NaN tolerance", "adaptive_limit: {tolerance: .nan}", "tolerance"},
		{"tolerance below 1", "adaptive_limit: {tolerance: 0.5}", "tolerance"},
		{"min above max", "adaptive_limit: {min_limit: 6, max_limit: 3}", "max"},
		{"negative min", "adaptive_limit: {min_limit: -1}", "min_limit"},
		{"zero smoothing written", "adaptive_limit: {smoothing: 2}", "smoothing"},
		{"NaN k", "client_throttle: {k: .nan}", "k"},
		{"max refusal 1", "client_throttle: {max_refusal: 1}", "max_refusal"},
		{"negative throttle window", "client_throttle: {window: -1s}", "window"},
		{"window calls 0", "circuit_breaker: {window_calls: 0}", "window_calls"},
		{"window calls beside window", "circuit_breaker: {window_calls: 50, window: 5s}", "window"},
		{"window calls below minimum calls", "circuit_breaker: {window_calls: 2, minimum_calls: 5}", "minimum"},
		{"window calls huge", "circuit_breaker: {window_calls: 99999999}", "window_calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "services:\n  example.inventory.v1.InventoryService:\n    " + tc.body + "\n"
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("override.Parse panicked: %v", r)
					}
				}()
				_, err = override.Parse("overrides.yaml", []byte(body), nil, inventory)
			}()
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.want) {
				t.Fatalf("%s: got %v, want an error naming %q", tc.body, err, tc.want)
			}
			t.Log(err)
		})
	}
}

// TestAdaptiveOverridesReportedAtTheKey: a bad value of the adaptive
// layers is reported at its own key, with the words of the plugin's and
// the runtime's checks (internal/check); a pair out of order, which only
// the runtime's check sees once the overrides are applied
// (policy.Service.Problems), at the key of the value it blames, the
// default max_limit included.
func TestAdaptiveOverridesReportedAtTheKey(t *testing.T) {
	const svc = `o.yaml: services."example.inventory.v1.InventoryService".`
	for _, tc := range []struct{ body, want string }{
		{"adaptive_limit: {tolerance: 0.5}",
			svc + "adaptive_limit.tolerance: must be a finite number of at least 1, got 0.5: below 1 the limit would shrink while the dependency is as fast as ever; remove this override to keep the annotated value"},
		{"adaptive_limit: {smoothing: 2}", svc + "adaptive_limit.smoothing: must be in (0, 1], got 2; remove this override to keep the annotated value"},
		{"adaptive_limit: {baseline_window: 5ns}",
			svc + "adaptive_limit.baseline_window: must be at least 10ns, got 5ns: the window is ten buckets of at least a nanosecond each; remove this override to keep the annotated value"},
		{"adaptive_limit: {max_limit: 2000000}", svc + "adaptive_limit.max_limit: must be at most 1048576, got 2000000; remove this override to keep the annotated value"},
		{"adaptive_limit: {min_limit: 6, max_limit: 3}",
			svc + "adaptive_limit.min_limit: min_limit 6 is above max_limit 3: lower min_limit or raise max_limit"},
		{"bulkhead: {permits: 200}\n    adaptive_limit: {min_limit: 150}",
			svc + "adaptive_limit.min_limit: min_limit 150 is above max_limit 100 (the default): lower min_limit or raise max_limit"},
		{"adaptive_limit: {min_limit: 4, initial_limit: 2}",
			svc + "adaptive_limit.initial_limit: initial_limit 2 is not between min_limit 4 and max_limit 8: set it within them"},
		{"client_throttle: {k: 0.5}",
			svc + "client_throttle.k: must be a finite number of at least 1, got 0.5: with less the throttler refuses requests the dependency accepts; remove this override to keep the annotated value"},
		{"client_throttle: {window: 5ns}",
			svc + "client_throttle.window: must be at least 10ns, got 5ns: the window is ten buckets of at least a nanosecond each; remove this override to keep the annotated value"},
		{"client_throttle: {max_refusal: 1}",
			svc + "client_throttle.max_refusal: must be in (0, 1), got 1: some attempts must always reach the dependency to see it recover; remove this override to keep the annotated value"},
	} {
		body := "services:\n  example.inventory.v1.InventoryService:\n    " + tc.body + "\n"
		_, err := override.Parse("o.yaml", []byte(body), nil, inventory)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.body, err, tc.want)
		}
	}
}
