package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// FuzzOverride feeds the loader an arbitrary file and arbitrary
// environment variables (one per line of env). It must not panic; a refusal
// must name, on every line, the file or the variable at fault; and what it
// accepts must build a client: runtime.NewClient must take the options of
// the set for every policy it was checked against. The seed corpus is in
// testdata/fuzz/FuzzOverride; CI runs the target for a few seconds.
func FuzzOverride(f *testing.F) {
	f.Add([]byte(""), "")
	f.Add([]byte(`
services:
  example.inventory.v1.InventoryService:
    timeout: 250ms
    circuit_breaker: {cool_down: 5s, failure_codes: [UNAVAILABLE]}
    retry_budget: {ratio: 0.2}
    methods:
      GetStock:
        timeout: 0.1s
        retry: {max_attempts: 2}
      WatchStock:
        bulkhead: {permits: 2}
`), "")
	f.Add([]byte(`{"services": {"example.payments.v1.PaymentsService": {"methods": {"Charge": {"timeout": "2s"}}}}}`),
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN=5s\n"+
			"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__TIMEOUT=200ms")
	f.Add([]byte(`{services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {max_attempts: 0}}}}}}`),
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY__RETRYABLE_CODES=UNAVAILABLE,RESOURCE_EXHAUSTED")
	f.Add([]byte(`{services: {example.inventory.v1.InventoryService: {circuit_breaker: {half_open_probes: 70000, failure_ratio: 1e-300}, bulkhead: {permits: 9223372036854775807, max_wait: 1e400s}}}}`), "")
	f.Add([]byte("services:\n  example.inventory.v1.InventoryService:\n    timeout: &a 1s\n    overall_timeout: *a\n"), "RESILIENT__=\nRESILIENT__X")
	f.Add([]byte(`{services: {example.inventory.v1.InventoryService: {timeout: 9223372036s, retry: {backoff_multiplier: .nan, initial_backoff: 0s}}}}`), "")
	f.Add([]byte(""), "resilient_example_inventory_v1_inventoryservice__timeout=1s\nRESILIENT_X=1\nRESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GetStock__RETRY_MAX_ATTEMPTS=2")
	// The number notation: each form the file and a variable must read
	// alike (number.go), the accepted and the refused.
	f.Add([]byte(`{services: {example.inventory.v1.InventoryService: {retry_budget: {min_retries: 0x10, ratio: 1e-1}, circuit_breaker: {cool_down: "1h05m", minimum_calls: 010}}}}`),
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY_BUDGET__MIN_RETRIES=1_0\n"+
			"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY_BUDGET__RATIO=+0.5\n"+
			"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN=0")
	f.Add([]byte("services:\n  example.inventory.v1.InventoryService:\n    retry_budget: {min_retries: \"3\", ratio: 0.50}\n    methods:\n      GetStock: {retry: {max_attempts: 3.0, backoff_multiplier: 1.5}}\n"),
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS=2\n"+
			"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__CIRCUIT_BREAKER__COOL_DOWN=0.5ns")
	f.Add([]byte(`{"services": {"example.inventory.v1.InventoryService": {"timeout": "2562047h47m16.854775808s", "bulkhead": {"permits": 4294967296}, "retry_budget": {"ratio": 0.`+strings.Repeat("0", 400)+`1}}}}`),
		"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__TIMEOUT=-1s\nRESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__BULKHEAD__PERMITS=")
	f.Add([]byte("services:\n  example.inventory.v1.InventoryService:\n    1: {}\n    \"1\": {}\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		var environ []string
		if env != "" {
			environ = strings.Split(env, "\n")
		}
		set, err := override.Parse("overrides.yaml", data, environ, inventory, payments)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "overrides.yaml") && !strings.HasPrefix(strings.ToUpper(line), "RESILIENT") {
					t.Fatalf("a refusal that names neither the file nor a variable: %q\nfile:\n%s\nenv:\n%s", line, data, env)
				}
			}
			return
		}
		for _, p := range []*policy.Service{inventory, payments} {
			if _, err := runtime.NewClient(p, set.Options(p)...); err != nil {
				t.Fatalf("the loader accepted overrides NewClient refuses: %v\nfile:\n%s\nenv:\n%s", err, data, env)
			}
		}
	})
}
