package example_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// waitFor polls cond for up to 10 s.
func waitFor25b(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestAttack25bStreamBulkheadOverrideSeenByTheServer: WatchStock's own
// bulkhead is annotated at 4 permits; a variable sets it to 2 (over the
// file's 3). Against a server that holds every stream open, the server
// sees 2 streams at once, and the third is refused by the client's
// bulkhead (RESOURCE_EXHAUSTED, bulkhead full) without reaching it;
// Describe shows the value and the variable it came from.
func TestAttack25bStreamBulkheadOverrideSeenByTheServer(t *testing.T) {
	const v = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__WATCHSTOCK__BULKHEAD__PERMITS"
	p := &inventoryv1.InventoryServiceResilientPolicy
	set, err := override.Parse("o.yaml", []byte(`
services:
  example.inventory.v1.InventoryService:
    methods:
      WatchStock: {bulkhead: {permits: 3, max_wait: 1ms}}
`), []string{v + "=2"}, p)
	if err != nil {
		t.Fatal(err)
	}
	srv, cc := dial(t, server.Hang)
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: set.Options(p)})
	if err != nil {
		t.Fatal(err)
	}
	if d := inv.Runtime().Describe(); !strings.Contains(d, "bulkhead (own): permits 2, max_wait 1ms") ||
		!strings.Contains(d, "methods.WatchStock.bulkhead.permits: 4 → 2 ("+v+")") {
		t.Errorf("Describe:\n%s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		waitFor25b(t, "the held streams to end", func() bool { return srv.InFlight() == 0 })
	}()
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}
	for i := range 2 {
		if _, err := inv.WatchStock(ctx, req); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	waitFor25b(t, "the server to hold 2 streams", func() bool { return srv.InFlight() == 2 })
	st, err := inv.WatchStock(ctx, req)
	if err == nil {
		_, err = st.Recv()
	}
	if !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Errorf("third stream: %v, want the bulkhead full", err)
	}
	if n := srv.Calls(watchStock); n != 2 {
		t.Errorf("the server saw %d streams, want 2", n)
	}
}
