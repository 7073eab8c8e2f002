package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
)

// attack19Lease loads a dedup lease of ReserveStock, on the method or the
// service, from the file or the environment, and builds the Guard's
// options from it; it returns the error, nil when accepted.
func attack19Lease(v, level string, env bool) error {
	var file string
	var environ []string
	switch {
	case env && level == "method":
		environ = []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__RESERVESTOCK__SERVER__DEDUP__LEASE=" + v}
	case env:
		environ = []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SERVER__DEDUP__LEASE=" + v}
	case level == "method":
		file = `{services: {example.inventory.v1.InventoryService: {methods: {ReserveStock: {server: {dedup: {lease: "` + v + `"}}}}}}}`
	default:
		file = `{services: {example.inventory.v1.InventoryService: {server: {dedup: {lease: "` + v + `"}}}}}`
	}
	s, err := override.Parse("o.yaml", []byte(file), environ, inventory, payments)
	if err != nil {
		return err
	}
	_, err = s.ServerOptions(inventoryServer)
	return err
}

// TestAttack19OverrideDedupLeaseBounds: an override of the dedup lease is
// held to [100 ms, 1 h] as the plugin holds the annotation, on the method
// or the service, in the file or a variable, the bounds accepted, each
// refusal at the key and naming the value as written.
func TestAttack19OverrideDedupLeaseBounds(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"1h", ""},
		{"3600s", ""},
		{"100ms", ""},
		{"59m59.999999999s", ""},
		{"1h0m0.000000001s", "must be at most 1h0m0s, got 1h0m0.000000001s"},
		{"3600000000001ns", "must be at most 1h0m0s, got 1h0m0.000000001s"},
		{"99999999ns", "must be at least 100ms, got 99.999999ms"},
		{"0s", "must be at least 100ms, got 0s"},
		{"-1s", "must be at least 100ms, got -1s"},
		{"2562047h47m16.854775808s", `not a duration: "2562047h47m16.854775808s"`},
	} {
		for _, level := range []string{"method", "service"} {
			for _, env := range []bool{false, true} {
				err := attack19Lease(tc.value, level, env)
				key := `o.yaml: services."example.inventory.v1.InventoryService".`
				if env {
					key = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
				}
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("lease %s on the %s (env %v) refused: %v", tc.value, level, env, err)
				case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), key) || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") != 0):
					t.Errorf("lease %s on the %s (env %v): %v; want one line at %s… saying %q", tc.value, level, env, err, key, tc.want)
				}
			}
		}
	}
}

// TestAttack19OverrideLongestDurationIsNamedAsWritten: the longest Go
// Duration, 2562047h47m16.854775807s, is a valid value of the override
// file (time.ParseDuration reads it), and as a lease it is too long: the
// loader refuses it as longer than 1h, naming the value written, not as
// more than a Duration holds (it is exactly the longest one). So is the
// shortest, as shorter than 100ms; a nanosecond past either is not a
// duration at all.
func TestAttack19OverrideLongestDurationIsNamedAsWritten(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"2562047h47m16.854775807s", "must be at most 1h0m0s, got 2562047h47m16.854775807s"},
		{"-2562047h47m16.854775808s", "must be at least 100ms, got -2562047h47m16.854775808s"},
		{"2562047h47m16.854775808s", `not a duration: "2562047h47m16.854775808s"`},
		{"-2562047h47m16.854775809s", `not a duration: "-2562047h47m16.854775809s"`},
	} {
		for _, level := range []string{"method", "service"} {
			for _, env := range []bool{false, true} {
				err := attack19Lease(tc.value, level, env)
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "more than a Go time.Duration holds") {
					t.Errorf("lease %s on the %s (env %v): %v; want it refused saying %q", tc.value, level, env, err, tc.want)
				}
			}
		}
	}
}
