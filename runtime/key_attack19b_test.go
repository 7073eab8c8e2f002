package runtime_test

import (
	"context"
	"strings"
	"testing"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/internal/contract"
)

// TestAttack19bKeysAtTheEdgesTravelAsSent: string keys the client lets
// through must reach the server byte for byte, or two requests with two
// keys would share one entry there. Keys that HTTP/2 calls malformed as
// field values (leading or trailing spaces), a key of spaces only, one of
// every printable byte ending in a space, and one of exactly the longest
// length ending in a space: each is sent once and received as it is.
func TestAttack19bKeysAtTheEdgesTravelAsSent(t *testing.T) {
	c, keys, fellBack, _ := keyedClient(t)
	sent := []string{" lead", "trail ", " both ", "   ", "a  b", "~!@#$%^&*()_+`-={}|[]\\:\";'<>?,./ ",
		strings.Repeat("k", contract.MaxIdempotencyKeyLength-1) + " "}
	for _, id := range sent {
		if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: id, Sku: "a", Units: 1}); err != nil {
			t.Errorf("ReserveStock with order_id %q: %v", id, err)
		}
	}
	got := keys()
	if len(got) != len(sent) {
		t.Fatalf("the server received %d calls (%q), want %d", len(got), got, len(sent))
	}
	for i := range sent {
		if got[i] != sent[i] {
			t.Errorf("key %q arrived as %q", sent[i], got[i])
		}
	}
	if fellBack() != 0 {
		t.Errorf("%d fallbacks, want none", fellBack())
	}
}
