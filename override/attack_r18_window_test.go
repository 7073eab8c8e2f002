package override_test

import (
	"strings"
	"testing"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/override"
)

// An override of circuit_breaker.window over a breaker that counts calls
// (window_calls) would change nothing the runtime reads: it is refused at
// its key instead of being accepted and ignored. Over a time window it
// applies.
func TestAttackR18WindowOverACountWindowIsRefused(t *testing.T) {
	const file = "services:\n  example.inventory.v1.InventoryService:\n    circuit_breaker: {window: 5s}\n"
	p := inventoryv1.InventoryServiceResilientPolicy.Clone()
	p.Breaker.WindowCalls = 50
	_, err := override.Parse("o.yaml", []byte(file), nil, &p)
	want := `o.yaml: services."example.inventory.v1.InventoryService".circuit_breaker.window: would change nothing`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("over window_calls: %v, want %q", err, want)
	}
	q := inventoryv1.InventoryServiceResilientPolicy.Clone()
	if _, err := override.Parse("o.yaml", []byte(file), nil, &q); err != nil {
		t.Errorf("over a time window: %v, want it applied", err)
	}
}
