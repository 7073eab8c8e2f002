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
