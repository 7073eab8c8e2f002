package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack24cPanicsThroughTwoGuardsGiveEverythingBack: "a place in
// flight is held until the handler returns, panics included", and a
// handler that panics has its key freed. Two Guards chained (taps and
// interceptors), each shedding the service and deduplicating ReserveStock
// on a store of its own, an interceptor outside both recovering panics.
// A deduplicated handler that panics five times with one key, then
// answers: each panic is INTERNAL, none kept, the sixth attempt runs and
// is kept; a stream handler that panics five times. Afterwards neither
// Guard holds a place, and the kept answer is replayed.
func TestAttack24cPanicsThroughTwoGuardsGiveEverythingBack(t *testing.T) {
	pol := func() *policy.Server {
		p := inventoryPolicy()
		p.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
		return p
	}
	g1, err := NewGuard([]*policy.Server{pol()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGuard([]*policy.Server{pol()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	recoverUnary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = status.Errorf(codes.Internal, "panic: %v", r)
			}
		}()
		return h(ctx, req)
	}
	recoverStream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = status.Errorf(codes.Internal, "panic: %v", r)
			}
		}()
		return h(srv, ss)
	}
	const panics = 5
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if srv.reserveCalls.Load() <= panics {
			panic("reserve boom")
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-after-panics"}, nil
	}
	srv.onWatch = func(context.Context) error { panic("watch boom") }
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(chainedTaps(g1, g2)),
		grpc.ChainUnaryInterceptor(recoverUnary, g1.UnaryInterceptor, g2.UnaryInterceptor),
		grpc.ChainStreamInterceptor(recoverStream, g1.StreamInterceptor, g2.StreamInterceptor))))
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-panic", Sku: "a", Units: 1}
	for i := range panics {
		if _, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-panic"), req); status.Code(err) != codes.Internal {
			t.Fatalf("attempt %d: %v; want the recovered INTERNAL", i, err)
		}
		st, err := client.WatchStock(ctxTimeout(t, 2*time.Second), &inventoryv1.WatchStockRequest{Sku: "a"})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Internal {
			t.Fatalf("stream %d: %v; want the recovered INTERNAL", i, err)
		}
	}
	for i := range 2 {
		resp, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-panic"), req)
		if err != nil || resp.GetReservationId() != "r-after-panics" {
			t.Fatalf("attempt %d after the panics: %v, %v; want the answer", i, resp, err)
		}
	}
	if n := srv.reserveCalls.Load(); n != panics+1 {
		t.Errorf("the handler ran %d times, want %d (each panic freed the key; the answer replayed)", n, panics+1)
	}
	eventually(t, "neither Guard holds a place", func() bool {
		return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0
	})
	if s := stats(t, g1); s.Replayed != 1 {
		t.Errorf("the outer Guard replayed %d, want 1", s.Replayed)
	}
}
