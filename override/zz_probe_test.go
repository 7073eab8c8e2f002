package override_test

import (
	"fmt"
	"testing"

	"github.com/go-resilient/resilient/override"
)

func TestZZProbe(t *testing.T) {
	files := []string{
		"services:\n",
		"services: null\n",
		"services: {}\n",
		"services: {example.inventory.v1.InventoryService: {}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: null}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {}}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: null}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {methods: {X: {}}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {bulkhead: {max_wait: -1ms}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {retryable_codes: [UNAVAILABLE, UNAVAILABLE]}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {retryable_codes: [\"\"]}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {retryable_codes: [14]}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {retryable_codes: [[UNAVAILABLE]]}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {rate_limit: {requests_per_second: 0.0000001}}}\n",
		"services: {example.inventory.v1.InventoryService: {rate_limit: {requests_per_second: 1" + "0000000000000000000000000000000000000000" + "}}}\n",
		"services: {example.inventory.v1.InventoryService: {circuit_breaker: {half_open_probes: 4294967295}}}\n",
		"services: {example.inventory.v1.InventoryService: {bulkhead: {permits: 4294967295}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {max_attempts: 4294967295}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {cache: {max_entries: 4294967295}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {adaptive_limit: {max_limit: 4294967295, min_limit: 4294967295}}}\n",
		"services: {example.inventory.v1.InventoryService: {timeout: 2562047h47m16.854775807s, overall_timeout: 2562047h47m16.854775807s}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {retry: {max_backoff: 2562047h47m16.854775807s, initial_backoff: 2562047h47m16.854775807s, backoff_multiplier: 1000000}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {retry_budget: {window: 1ns}}}\n",
		"services: {example.inventory.v1.InventoryService: {circuit_breaker: {window: 1ns}}}\n",
		"services: {example.inventory.v1.InventoryService: {client_throttle: {window: 1ns}}}\n",
		"services: {example.inventory.v1.InventoryService: {<<: {timeout: 1s}, timeout: 2s}}\n",
		"\xef\xbb\xbfservices: {example.inventory.v1.InventoryService: {timeout: 1s}}\n",
		"\x00\x01\x02",
		"services: {example.inventory.v1.InventoryService: {timeout: !!int 5}}\n",
		"services: {example.inventory.v1.InventoryService: {timeout: !!float 5s}}\n",
		"services: {example.inventory.v1.InventoryService: {retry_budget: {ratio: !!str 0.5}}}\n",
		"services: {example.inventory.v1.InventoryService: {retry_budget: {ratio: !custom 0.5}}}\n",
		"services: {example.inventory.v1.InventoryService: {retry_budget: {ratio: 2001-01-01}}}\n",
		"services: {example.inventory.v1.InventoryService: {bulkhead: {per_method: yes}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {bulkhead: {per_method: yes}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {bulkhead: {per_method: \"true\"}}}}}\n",
		"services: {example.inventory.v1.InventoryService: {methods: {GetStock: {bulkhead: {per_method: false}}}}}\n",
		"services: {example.payments.v1.PaymentsService: {methods: {GetStock: {timeout: 1s}}}}\n",
	}
	for _, f := range files {
		_, err := override.Parse("o.yaml", []byte(f), nil, inventory, payments)
		fmt.Printf("FILE %q\n  => %v\n", f, err)
	}
	envs := [][]string{
		{invEnv + "__BULKHEAD__PER_METHOD="},
		{invEnv + "__METHODS__GETSTOCK__BULKHEAD__PER_METHOD=yes"},
		{invEnv + "__METHODS__GETSTOCK__BULKHEAD__PER_METHOD=1"},
		{invEnv + "__METHODS__GETSTOCK__BULKHEAD__PER_METHOD=false"},
		{invEnv + "__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES=UNAVAILABLE, DEADLINE_EXCEEDED"},
		{invEnv + "__METHODS__GETSTOCK__RETRY__RETRYABLE_CODES=UNAVAILABLE,,UNAVAILABLE"},
		{invEnv + "__TIMEOUT=1s\n"},
		{invEnv + "__TIMEOUT"},
		{invEnv + "__TIMEOUT=1s=2s"},
		{invEnv + "__METHODS__GETSTOCK__METHODS__GETSTOCK__TIMEOUT=1s"},
		{invEnv + "__METHODS__GETSTOCK__TIMEOUT=1s", "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GetStock__TIMEOUT=2s"},
		{"=1s", "RESILIENT__=", "RESILIENT"},
		{invEnv + "__SHEDDING__CODE=14"},
		{invEnv + "__PRIORITY=HIGH"},
		{invEnv + "__RETRY_BUDGET__RATIO=0.5", invEnv + "__RETRY_BUDGET__RATIO=0.50"},
	}
	for _, e := range envs {
		_, err := override.Parse("o.yaml", nil, e, inventory, payments)
		fmt.Printf("ENV %q\n  => %v\n", e, err)
	}
}
