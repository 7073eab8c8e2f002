package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack23dDependencysUnauthenticatedAfterTheChargeIsKept: since
// e08b282 UNAUTHENTICATED is not kept, so that a caller's retry with fresh
// credentials runs. But a handler that has done its work (charged, through
// a dependency) and then passes on a dependency's UNAUTHENTICATED (the
// server's own credentials to its ledger expired: nothing about the
// caller's) had the key released, and the caller's retry with the same key
// charged a second time. A dependency's UNAUTHENTICATED that the handler
// passes on (a call through ClientInterceptor ended with it) is the
// handler's answer and kept as FinalCodes say, the retry replayed, one
// charge; with one Guard, and with two on one store (the outer keeps,
// the calls recorded by the inner's).
func TestAttack23dDependencysUnauthenticatedAfterTheChargeIsKept(t *testing.T) {
	for _, two := range []bool{false, true} {
		name := "one Guard"
		if two {
			name = "two Guards on one store"
		}
		t.Run(name, func(t *testing.T) {
			var charges atomic.Int64
			down := &inventoryServer{}
			down.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
				if req.GetSku() == "ledger" {
					return nil, status.Error(codes.Unauthenticated, "ledger: the service account's token expired")
				}
				charges.Add(1)
				return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
			}
			dep := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, down), grpc.WithChainUnaryInterceptor(ClientInterceptor())))
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				if _, err := dep.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "charge"}); err != nil {
					return nil, err
				}
				if _, err := dep.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "ledger"}); err != nil {
					return nil, err // passed on as it came
				}
				return &inventoryv1.ReserveStockResponse{ReservationId: "r"}, nil
			}
			store := NewMemoryStore(10)
			g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
			if err != nil {
				t.Fatal(err)
			}
			opts := g.ServerOptions()
			if two {
				g2, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, grpc.ChainUnaryInterceptor(g2.UnaryInterceptor))
			}
			client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
			for i, token := range []string{"good", "fresh"} {
				var trailer metadata.MD
				_, err := client.ReserveStock(withToken(withKey(ctxTimeout(t, 5*time.Second), "k-ledger"), token),
					&inventoryv1.ReserveStockRequest{OrderId: "o-ledger", Sku: "a", Units: 1}, grpc.Trailer(&trailer))
				if status.Code(err) != codes.Unauthenticated {
					t.Fatalf("call %d: %v; want the ledger's UNAUTHENTICATED", i, err)
				}
				if replayed := len(trailer.Get(ReplayedHeader)) == 1; replayed != (i == 1) {
					t.Errorf("call %d replayed: %v; want %v", i, replayed, i == 1)
				}
			}
			if n, r := charges.Load(), stats(t, g).Replayed; n != 1 || r != 1 {
				t.Errorf("charged %d times, %d replays; want 1 and 1: the retry with the same key charged again", n, r)
			}
		})
	}
}
