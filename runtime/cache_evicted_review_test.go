package runtime_test

import (
	"context"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
)

// TestLateAnswerOfAnAbandonedSharedCallAfterTheNewerWasEvicted is
// TestAttack22aLateAnswerOfAnAbandonedSharedCallDoesNotReplaceANewerOne
// with the newer answer evicted before the older comes back (max_entries
// 1, another key read in between): caller A's shared call of apple hangs
// and A gives up; B reads apple anew (units 2); C reads pear, which
// evicts apple; A's attempt then answers units 1, the older reading. A
// caller of apple after that must not be served units 1 as fresh, an
// answer older than the one B already got.
func TestLateAnswerOfAnAbandonedSharedCallAfterTheNewerWasEvicted(t *testing.T) {
	atkNoLeak(t)
	inv, cc, returned := startAttack22aVersions(t)
	apple := &inventoryv1.GetStockRequest{Sku: "apple"}
	c := abandonAttack22a(t, inv, cc, apple, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := c.GetStock(ctx, apple); err != nil || resp.GetUnits() != 2 {
		t.Fatalf("caller B: %v, %v; want units 2 from a new shared call", resp, err)
	}
	if resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "pear"}); err != nil || resp.GetUnits() != 2 {
		t.Fatalf("caller C (pear): %v, %v; want units 2", resp, err)
	}

	close(inv.release)
	<-returned
	// The abandoned shared call keeps its answer a moment after its
	// attempt returned: give it that moment, many times over.
	time.Sleep(50 * time.Millisecond)
	resp, err := c.GetStock(ctx, apple)
	if err != nil || resp.GetUnits() != 2 {
		t.Fatalf("apple after B: %v, %v; want units 2 (B's reading, or a new one), not the older answer of the call A abandoned", resp, err)
	}
}
