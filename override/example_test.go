package override_test

import (
	"fmt"
	"os"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// Load the overrides once at start-up, against the policies of every
// client the program builds, and refuse to start on a bad file.
func ExampleParse() {
	file := []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {timeout: 150ms, retry: {max_attempts: 2}}
  example.payments.v1.PaymentsService:
    methods:
      Charge: {retry: {max_attempts: 3}}   # refused: Charge is not idempotent
`)
	_, err := override.Parse("overrides.yaml", file, os.Environ(),
		&inventoryv1.InventoryServiceResilientPolicy, &paymentsv1.PaymentsServiceResilientPolicy)
	fmt.Println(err)

	file = []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock: {timeout: 150ms, retry: {max_attempts: 2}}
`)
	set, err := override.Parse("overrides.yaml", file, nil, &inventoryv1.InventoryServiceResilientPolicy)
	if err != nil {
		panic(err)
	}
	client, err := runtime.NewClient(&inventoryv1.InventoryServiceResilientPolicy, set.Options(&inventoryv1.InventoryServiceResilientPolicy)...)
	if err != nil {
		panic(err)
	}
	for _, c := range client.Changes() {
		fmt.Printf("%s: %s → %s from %s\n", c.Key, c.Annotated, c.Value, c.Source)
	}
	// Output:
	// overrides.yaml: services."example.payments.v1.PaymentsService".methods.Charge.retry: Charge is not idempotent and has no idempotency_key, so a retry could apply it twice: do not retry it (no retry, or retry.max_attempts: 1)
	// methods.GetStock.retry.max_attempts: 3 → 2 from overrides.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.retry.max_attempts
	// methods.GetStock.timeout: 300ms → 150ms from overrides.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.timeout
}
