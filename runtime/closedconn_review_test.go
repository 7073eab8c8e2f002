package runtime_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestClosedConnGetsNoFallbackNorStaleAnswer: the README's "Fallback" and
// "Cache" name a call on a ClientConn the program closed among the
// failures on the client's own side, which neither the fallback nor a
// stale answer stands in for: gRPC ends it CANCELLED ("the client
// connection is closing"), though the caller cancelled nothing, on every
// call after. GetStock with a fallback, and GetStock cached with its
// answer kept past fresh_ttl, each on a connection closed after a first
// answer: the caller gets gRPC's CANCELLED, the fallback does not run,
// and the server sees no further call.
func TestClosedConnGetsNoFallbackNorStaleAnswer(t *testing.T) {
	atkNoLeak(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &inventoryv1.GetStockRequest{Sku: "apple"}

	t.Run("fallback", func(t *testing.T) {
		srv, cc := startFault(t, server.Healthy)
		var fb fallbacks
		c := invClient(t, cc, &fb, nil)
		if _, err := c.GetStock(ctx, req); err != nil {
			t.Fatalf("first call: %v", err)
		}
		_ = cc.Close()
		resp, err := c.GetStock(ctx, req)
		if status.Code(err) != codes.Canceled {
			t.Errorf("a call on the closed conn: %v, %v; want gRPC's CANCELLED", resp, err)
		}
		if n := fb.n.Load(); n != 0 {
			t.Errorf("the fallback ran %d times for a call on a closed conn, want 0", n)
		}
		if n := srv.Calls(atkGetStock); n != 1 {
			t.Errorf("the server saw %d GetStock calls, want 1 (the first)", n)
		}
	})

	t.Run("stale answer", func(t *testing.T) {
		srv, cc := startFault(t, server.Healthy)
		clock := newAtkClock()
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}}, func(p *policy.Service) {
			atkMethod(p, atkGetStock).Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Second, StaleTTL: time.Hour, MaxEntries: 10}
		})
		if _, err := c.GetStock(ctx, req); err != nil {
			t.Fatalf("first call: %v", err)
		}
		_ = cc.Close()
		clock.Advance(2 * time.Second) // past fresh_ttl, within stale_ttl
		resp, err := c.GetStock(ctx, req)
		if status.Code(err) != codes.Canceled {
			t.Errorf("a call on the closed conn: %v, %v; want gRPC's CANCELLED, not the stale answer", resp, err)
		}
		if n := srv.Calls(atkGetStock); n != 1 {
			t.Errorf("the server saw %d GetStock calls, want 1 (the first)", n)
		}
	})
}
