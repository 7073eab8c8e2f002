package runtime_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestOnFinishSeesWhatTheCallerGets: the README's "grpc.OnFinish" runs
// the caller's callback once "with the error the caller gets (nil for an
// answer, the fallback's answer included)". Against a dependency that
// answers UNAVAILABLE on every attempt, a call answered by its fallback,
// and a cached call answered by its stale value, each run the callback
// once, with nil, not with the dependency's UNAVAILABLE; a call with
// neither runs it once with UNAVAILABLE.
func TestOnFinishSeesWhatTheCallerGets(t *testing.T) {
	atkNoLeak(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	oneAttempt := func(p *policy.Service) {
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Hedging = nil, nil
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
	}

	t.Run("fallback", func(t *testing.T) {
		srv, cc := startFault(t, server.Fail(codes.Unavailable))
		var fb fallbacks
		c := invClient(t, cc, &fb, oneAttempt)
		var f attack22aFinishes
		if resp, err := c.GetStock(ctx, req, f.option()); err != nil || resp.GetUnits() != -1 {
			t.Fatalf("GetStock: %v, %v; want the fallback's answer", resp, err)
		}
		if fb.n.Load() != 1 || srv.Calls(atkGetStock) != 1 {
			t.Fatalf("fallback ran %d times, server saw %d calls; want 1 and 1", fb.n.Load(), srv.Calls(atkGetStock))
		}
		f.wantOnce(t, "a call the fallback answered", codes.OK)
	})

	t.Run("stale answer", func(t *testing.T) {
		srv, cc := startFault(t, server.Healthy)
		clock := newAtkClock()
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}}, func(p *policy.Service) {
			oneAttempt(p)
			atkMethod(p, atkGetStock).Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Second, StaleTTL: time.Hour, MaxEntries: 10}
		})
		if _, err := c.GetStock(ctx, req); err != nil {
			t.Fatalf("first call: %v", err)
		}
		srv.SetBehaviour(server.Fail(codes.Unavailable))
		clock.Advance(2 * time.Second) // past fresh_ttl, within stale_ttl
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, req, f.option()); err != nil {
			t.Fatalf("GetStock: %v; want the stale answer", err)
		}
		if n := srv.Calls(atkGetStock); n != 2 {
			t.Fatalf("the server saw %d calls, want 2 (the first, the failed one)", n)
		}
		f.wantOnce(t, "a call a stale answer stood in for", codes.OK)
	})

	t.Run("neither", func(t *testing.T) {
		_, cc := startFault(t, server.Fail(codes.Unavailable))
		c := invClient(t, cc, nil, oneAttempt)
		var f attack22aFinishes
		if _, err := c.GetStock(ctx, req, f.option()); err == nil {
			t.Fatal("GetStock succeeded against UNAVAILABLE")
		}
		f.wantOnce(t, "a call that failed", codes.Unavailable)
	})
}
