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

// TestAttack24hCallCutByTheDeadlineThenLateFailureIsKept: "a failure the
// handler gives once its request ended is not kept … unless a call the
// handler made through ClientInterceptor answered before: work may have
// been done (a charge)". A call that did not answer OK may have done the
// work as well: the ledger (on a connection with no Guard at its server)
// charged, and its answer was cut by the request's deadline, the call
// ending DEADLINE_EXCEEDED; the handler then failed INTERNAL under a
// FinalCodes holding INTERNAL. That failure was not kept, and the
// caller's retry with the key charged again. A call that ended in any
// way but a dependency Guard's refusal at its door may have done work:
// the failure is kept as FinalCodes say, the retry replayed.
func TestAttack24hCallCutByTheDeadlineThenLateFailureIsKept(t *testing.T) {
	pol := inventoryPolicy()
	pol.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	var charges atomic.Int64
	ledger := &inventoryServer{}
	ledger.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		charges.Add(1) // charged; the receipt is slow
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	dep := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, ledger), grpc.WithChainUnaryInterceptor(ClientInterceptor())))
	srv := &inventoryServer{}
	var depCode atomic.Int64
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		_, err := dep.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "charge"})
		depCode.Store(int64(status.Code(err)))
		if err != nil {
			return nil, status.Errorf(codes.Internal, "charging: %v", err)
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r"}, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{pol})
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-cut", Sku: "a", Units: 1}
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, 150*time.Millisecond), "k-cut"), req); err == nil {
		t.Fatal("the first attempt answered; want a failure")
	}
	eventually(t, "the first run ends", func() bool { return srv.reserveCalls.Load() == 1 && depCode.Load() != 0 })
	if c := codes.Code(depCode.Load()); c != codes.DeadlineExceeded {
		t.Fatalf("the ledger's call ended %s, want DEADLINE_EXCEEDED (the test's premise)", c)
	}
	var trailer metadata.MD
	eventually(t, "the first attempt's failure is kept", func() bool {
		trailer = nil
		_, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-cut"), req, grpc.Trailer(&trailer))
		return status.Code(err) == codes.Internal && len(trailer.Get(ReplayedHeader)) == 1 || srv.reserveCalls.Load() > 1
	})
	if n, c := srv.reserveCalls.Load(), charges.Load(); n != 1 || c != 1 {
		t.Errorf("the handler ran %d times, charged %d; want 1 and 1 (the retry replayed, not charged again)", n, c)
	}
	if s := stats(t, g); s.Replayed == 0 {
		t.Errorf("no replay")
	}
}
