package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

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

// TestAttack22dInProcessCallOfAnotherKeyedMethodIsDeduplicated: two
// Guards chained on one store, GetStock deduplicated as ReserveStock is.
// ReserveStock's handler calls GetStock in-process, through both Guards'
// interceptors, with its own context: the same incoming idempotency key,
// and the hold of ReserveStock's key in its values. GetStock's key is
// another (its method's): it must be claimed and kept, not waved through
// as already held, so that a later GetStock sent with that key is
// replayed rather than run again.
func TestAttack22dInProcessCallOfAnotherKeyedMethodIsDeduplicated(t *testing.T) {
	p := inventoryPolicy()
	p.Methods[0].Dedup = &policy.Dedup{TTL: time.Minute, Lease: 3 * time.Second}
	p.Methods[0].NewResponse = func() proto.Message { return new(inventoryv1.GetStockResponse) }
	store := NewMemoryStore(10)
	var guards []*Guard
	for range 2 {
		g, err := NewGuard([]*policy.Server{p}, WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		guards = append(guards, g)
	}
	srv := &inventoryServer{}
	info := &grpc.UnaryServerInfo{FullMethod: getStock}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		_, err := guards[0].UnaryInterceptor(ctx, &inventoryv1.GetStockRequest{Sku: "a"}, info, func(ctx context.Context, r any) (any, error) {
			return guards[1].UnaryInterceptor(ctx, r, info, func(ctx context.Context, r any) (any, error) {
				return srv.GetStock(ctx, r.(*inventoryv1.GetStockRequest))
			})
		})
		if err != nil {
			return nil, err
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(guards[0].TapHandle),
		grpc.ChainUnaryInterceptor(guards[0].UnaryInterceptor, guards[1].UnaryInterceptor))))
	ctx := withKey(ctxTimeout(t, 2*time.Second), "k-inproc")
	if _, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "k-inproc", Sku: "a", Units: 1}); err != nil {
		t.Fatalf("ReserveStock: %v", err)
	}
	if n := store.Len(); n != 2 {
		t.Errorf("%d entries in the store, want 2: ReserveStock's key and GetStock's", n)
	}
	if _, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatalf("GetStock with the key: %v", err)
	}
	if n := srv.getCalls.Load(); n != 1 {
		t.Errorf("GetStock's handler ran %d times, want 1: the in-process call's outcome replayed", n)
	}
}
