package server

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack22dOuterGuardOnAnotherStoreKeepsTheInnersDedup: two replicas
// of one service, each with a library's Guard on a store of its own (a
// MemoryStore, one process) outside the service's Guard, whose store the
// replicas share (as one Redis). The inner passed on every key the outer
// held, whatever the store: its shared store never saw the key, and a
// repeat sent to the other replica ran the handler a second time, where
// the service's Guard alone would have replayed it. The inner passes on
// only a key its own store holds for this request (the outer's claim, in
// a store the two share); else it claims the key in its store.
func TestAttack22dOuterGuardOnAnotherStoreKeepsTheInnersDedup(t *testing.T) {
	shared := NewMemoryStore(10)
	srv := &inventoryServer{}
	var outers, inners []*Guard
	var clients []inventoryv1.InventoryServiceClient
	for range 2 {
		outer, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(shared))
		if err != nil {
			t.Fatal(err)
		}
		outers, inners = append(outers, outer), append(inners, inner)
		clients = append(clients, inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(outer.TapHandle),
			grpc.ChainUnaryInterceptor(outer.UnaryInterceptor, inner.UnaryInterceptor)))))
	}
	send := func(c inventoryv1.InventoryServiceClient) (*inventoryv1.ReserveStockResponse, error) {
		return c.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-replicas"),
			&inventoryv1.ReserveStockRequest{OrderId: "k-replicas", Sku: "a", Units: 1})
	}
	first, err := send(clients[0])
	if err != nil {
		t.Fatalf("first request, replica 0: %v", err)
	}
	again, err := send(clients[1])
	if err != nil {
		t.Fatalf("repeat, replica 1: %v", err)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times over the two replicas, want 1 (the shared store's replay)", n)
	}
	if again.GetReservationId() != first.GetReservationId() {
		t.Errorf("repeat answered %q, want the replay of %q", again.GetReservationId(), first.GetReservationId())
	}
	if s := stats(t, inners[1]); s.Replayed != 1 {
		t.Errorf("replica 1's inner Guard replayed %d, want 1", s.Replayed)
	}
	if shared.Len() != 1 {
		t.Errorf("%d entries in the shared store, want the key's", shared.Len())
	}
	// On one replica the outer Guard still replays, the inner passing on.
	if _, err := send(clients[0]); err != nil {
		t.Fatalf("repeat, replica 0: %v", err)
	}
	if s := stats(t, outers[0]); s.Replayed != 1 {
		t.Errorf("replica 0's outer Guard replayed %d, want 1", s.Replayed)
	}
}
