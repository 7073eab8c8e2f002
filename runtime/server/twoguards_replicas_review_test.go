package server

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestTwoGuardsOnTwoReplicasInnerStoreShared: two replicas of a service,
// each with a library's Guard on a store of its own replica (outer) and
// the service's Guard on one store the replicas share (inner, as Redis
// is). A request with a key runs on the first replica; its retry, with
// the same key and body, reaches the second. The inner Guard of the
// second must find the key done in the shared store and replay it: the
// handler runs once across the replicas. The outer Guard of the second
// has never seen the key (its store is its own), so it runs the inner
// one as it runs any first request. (An inner Guard passes a request on
// only when its claim finds the outer's own claim, by its owner token:
// passing on whenever an outer Guard held the key, whichever its store,
// ran the handler twice here.)
func TestTwoGuardsOnTwoReplicasInnerStoreShared(t *testing.T) {
	shared := NewMemoryStore(10)
	srv := &inventoryServer{}
	var clients []inventoryv1.InventoryServiceClient
	var inners []*Guard
	for range 2 {
		outer, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(shared))
		if err != nil {
			t.Fatal(err)
		}
		inners = append(inners, inner)
		clients = append(clients, inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(outer.TapHandle),
			grpc.ChainUnaryInterceptor(outer.UnaryInterceptor, inner.UnaryInterceptor)))))
	}
	var ids []string
	for i, c := range clients {
		resp, err := c.ReserveStock(withKey(ctxTimeout(t, 500*time.Millisecond), "k-replicas"),
			&inventoryv1.ReserveStockRequest{OrderId: "k-replicas", Sku: "a", Units: 1})
		if err != nil {
			t.Fatalf("replica %d: %v", i+1, err)
		}
		ids = append(ids, resp.GetReservationId())
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times across the replicas, want 1 (the second replica's inner Guard replays the shared store's outcome)", n)
	}
	if ids[0] != ids[1] {
		t.Errorf("the replicas answered %q and %q, want one answer", ids[0], ids[1])
	}
	if s := stats(t, inners[1]); s.Replayed != 1 {
		t.Errorf("the second replica's inner Guard replayed %d, want 1", s.Replayed)
	}
}
