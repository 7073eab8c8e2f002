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
// ending DEADLINE_EXCEEDED (or CANCELLED); the handler then failed INTERNAL under a
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
	// The request's end cuts the call: its deadline, or the caller's
	// cancel of the stream at its own deadline, whichever comes first.
	if c := codes.Code(depCode.Load()); c != codes.DeadlineExceeded && c != codes.Canceled {
		t.Fatalf("the ledger's call ended %s, want DEADLINE_EXCEEDED or CANCELLED (the test's premise)", c)
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

// TestAttack24hLateFailureAfterADependencysRefusalIsNotKept: the other
// side of the rule above. A call that the dependency's Guard refused at
// its door (its deadline mark: the ledger's handler never ran) did no
// work: the handler's failure given once its request ended is not kept,
// and the caller's retry runs.
func TestAttack24hLateFailureAfterADependencysRefusalIsNotKept(t *testing.T) {
	pol := inventoryPolicy()
	pol.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	ledgerPol := inventoryPolicy()
	ledgerPol.Methods[0].MinDeadline = time.Second // refuses the call below
	ledgerGuard, err := NewGuard([]*policy.Server{ledgerPol}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	ledger := &inventoryServer{}
	dep := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, ledger, ledgerGuard.ServerOptions()...), grpc.WithChainUnaryInterceptor(ClientInterceptor())))
	srv := &inventoryServer{}
	var depErr atomic.Value
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if srv.reserveCalls.Load() > 1 {
			return &inventoryv1.ReserveStockResponse{ReservationId: "r-run"}, nil
		}
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := dep.GetStock(cctx, &inventoryv1.GetStockRequest{Sku: "charge"})
		cancel()
		depErr.Store(status.Convert(err).Proto().String())
		<-ctx.Done()
		return nil, status.Errorf(codes.Internal, "charging: %v", err)
	}
	_, client, _ := guarded(t, srv, []*policy.Server{pol})
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-refused", Sku: "a", Units: 1}
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, 800*time.Millisecond), "k-refused"), req); err == nil {
		t.Fatal("the first attempt answered; want a failure")
	}
	if n := ledger.getCalls.Load(); n != 0 {
		t.Fatalf("the ledger's handler ran %d times; want its Guard to refuse the call (the test's premise): %v", n, depErr.Load())
	}
	resp, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-refused"), req)
	if err != nil || resp.GetReservationId() != "r-run" {
		t.Errorf("the retry: %v, %v; want it run (no work was done: the dependency refused the call, %v)", resp, err, depErr.Load())
	}
}
