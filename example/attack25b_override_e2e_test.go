package example_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// TestAttack25bOverrideSeenByTheServer: an accepted override takes
// effect on a real loopback server answering UNAVAILABLE, each method by
// its own values after the order of precedence (a service's retry in the
// file adds retries to StockReport, which has none annotated; a
// variable at a method beats the file's method value; a variable turns
// ReserveStock's retries off), and Changes/Describe list exactly the
// values moved, each from the key in force.
func TestAttack25bOverrideSeenByTheServer(t *testing.T) {
	const (
		svc  = `o.yaml: services."example.inventory.v1.InventoryService"`
		vars = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__"
	)
	file := `
services:
  example.inventory.v1.InventoryService:
    retry: {max_attempts: 4, initial_backoff: 1ms, max_backoff: 2ms}
    methods:
      GetStock: {retry: {max_attempts: 5}}
`
	env := []string{vars + "GETSTOCK__RETRY__MAX_ATTEMPTS=2", vars + "RESERVESTOCK__RETRY__MAX_ATTEMPTS=1", "HOME=/x"}
	p := &inventoryv1.InventoryServiceResilientPolicy
	set, err := override.Parse("o.yaml", []byte(file), env, p)
	if err != nil {
		t.Fatal(err)
	}
	srv, inv, err := edited(t, append([]runtime.Option{patient}, set.Options(p)...)...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"GetStock": 2, "ReserveStock": 1, "StockReport": 4}
	if got := attempts(t, srv, inv); !maps.Equal(got, want) {
		t.Errorf("attempts seen by the server = %v, want %v", got, want)
	}
	var got []string
	for _, ch := range inv.Runtime().Changes() {
		if ch.Source != "WithPolicy" { // patient's timeouts
			got = append(got, fmt.Sprintf("%s: %s → %s (%s)", ch.Key, ch.Annotated, ch.Value, ch.Source))
		}
	}
	for _, line := range []string{
		// The file's service retry: added to StockReport from the
		// contract's defaults by the first of its keys applied, each
		// value the file sets from its own key.
		"methods.StockReport.retry.max_attempts: none → 4 (" + svc + ".retry.max_attempts)",
		"methods.StockReport.retry.initial_backoff: none → 1ms (" + svc + ".retry.initial_backoff)",
		"methods.StockReport.retry.max_backoff: none → 2ms (" + svc + ".retry.max_backoff)",
		"methods.StockReport.retry.backoff_multiplier: none → 2 (" + svc + ".retry.initial_backoff)",
		"methods.StockReport.retry.retryable_codes: none → [UNAVAILABLE] (" + svc + ".retry.initial_backoff)",
		"methods.GetStock.retry.initial_backoff: 50ms → 1ms (" + svc + ".retry.initial_backoff)",
		"methods.ReserveStock.retry.initial_backoff: 50ms → 1ms (" + svc + ".retry.initial_backoff)",
		"methods.GetStock.retry.max_backoff: 200ms → 2ms (" + svc + ".retry.max_backoff)",
		"methods.ReserveStock.retry.max_backoff: 1s → 2ms (" + svc + ".retry.max_backoff)",
		// The variables, over the file's service and method values.
		"methods.GetStock.retry.max_attempts: 3 → 2 (" + vars + "GETSTOCK__RETRY__MAX_ATTEMPTS)",
		"methods.ReserveStock.retry.max_attempts: 3 → 1 (" + vars + "RESERVESTOCK__RETRY__MAX_ATTEMPTS)",
	} {
		if !slices.Contains(got, line) {
			t.Errorf("Changes do not list %q", line)
		}
	}
	if len(got) != 11 {
		t.Errorf("%d changes from the overrides, want 11:\n%s", len(got), strings.Join(got, "\n"))
	}
	describe := inv.Runtime().Describe()
	for _, line := range got {
		if !strings.Contains(describe, "    "+line+"\n") {
			t.Errorf("Describe does not list %q:\n%s", line, describe)
		}
	}
}
