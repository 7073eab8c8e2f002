package override_test

import (
	"strings"
	"testing"

	"github.com/go-resilient/resilient/override"
)

// A shedding limit an override puts below the one of a lower priority is
// refused at its key, named once.
func TestAttackR18SheddingOrderNamesTheKeyOnce(t *testing.T) {
	s, err := override.Parse("overrides.yaml", []byte("services:\n  example.inventory.v1.InventoryService: {shedding: {critical: 40}}\n"), nil, inventory, payments)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ServerOptions(inventoryServer)
	key := `overrides.yaml: services."example.inventory.v1.InventoryService".shedding.critical: `
	if err == nil || !strings.Contains(err.Error(), key+"40 is below high (48)") {
		t.Fatalf("got %v, want the refusal at %s", err, key)
	}
	if strings.Contains(err.Error(), "shedding.critical: shedding.critical") {
		t.Errorf("the key is named twice: %v", err)
	}
}
