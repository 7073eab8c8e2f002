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

// TestAttack24cFailureAfterTheRequestEndedIsNotKept: "a request ended by
// its caller's cancellation or deadline is not kept: its retry runs the
// handler again", whatever code the handler gives its failure. A handler
// that formats its context's error into a status of its own
// (status.Errorf(codes.Internal, "%v", ctx.Err())) once the caller's
// deadline, its cancellation or the DefaultTimeout ended the request,
// under a FinalCodes that hold INTERNAL, had that ending kept: the retry
// got INTERNAL "context deadline exceeded" replayed for the TTL, the
// operation never run. A failure the handler gives after its request
// ended is not kept; its retry runs.
func TestAttack24cFailureAfterTheRequestEndedIsNotKept(t *testing.T) {
	pol := inventoryPolicy()
	pol.Methods[1].DefaultTimeout = 150 * time.Millisecond
	pol.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-late", Sku: "a", Units: 1}
	for _, tc := range []struct {
		name  string
		first func(t *testing.T) (context.Context, func())
	}{
		{"the caller's deadline", func(t *testing.T) (context.Context, func()) {
			return ctxTimeout(t, 100*time.Millisecond), func() {}
		}},
		{"the caller's cancellation", func(t *testing.T) (context.Context, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{"the DefaultTimeout", func(t *testing.T) (context.Context, func()) { return context.Background(), func() {} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				if srv.reserveCalls.Load() == 1 {
					<-ctx.Done()
					return nil, status.Errorf(codes.Internal, "reserving: %v", ctx.Err())
				}
				return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
			}
			g, client, _ := guarded(t, srv, []*policy.Server{pol})
			ctx, cancel := tc.first(t)
			defer cancel()
			if _, err := client.ReserveStock(withKey(ctx, "k-late"), req); err == nil {
				t.Fatal("the first attempt answered; want its ending")
			}
			var trailer metadata.MD
			resp, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-late"), req, grpc.Trailer(&trailer))
			if err != nil || resp.GetReservationId() != "r-o-late" {
				t.Fatalf("the retry: %v, %v (replayed %q); want the handler's answer, not the first attempt's ending replayed", resp, err, trailer.Get(ReplayedHeader))
			}
			if n := srv.reserveCalls.Load(); n != 2 {
				t.Errorf("the handler ran %d times, want 2", n)
			}
			if s := stats(t, g); s.Replayed != 0 {
				t.Errorf("%d replays, want 0", s.Replayed)
			}
		})
	}
}

// TestAttack24cWorkDoneBeforeTheRequestEndedIsKept: the other half of
// the rule, the user's safety. A handler that charged (a call to its
// ledger through ClientInterceptor answered) and then failed once its
// caller's deadline passed, formatting the context's error, has its
// failure kept as FinalCodes say: the charge ran, and its caller's retry
// with the key is replayed, not charged again. So is an answer given
// after the request ended (the work was done): the retry is replayed.
// Only the first, which did no work, is run again on retry.
func TestAttack24cWorkDoneBeforeTheRequestEndedIsKept(t *testing.T) {
	pol := inventoryPolicy()
	pol.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Internal)
	var charges atomic.Int64
	ledger := &inventoryServer{}
	ledger.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		charges.Add(1)
		return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
	}
	dep := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, ledger), grpc.WithChainUnaryInterceptor(ClientInterceptor())))
	for _, tc := range []struct {
		name    string
		answers bool // the handler answers after the deadline, rather than failing
		want    codes.Code
	}{
		{"a failure after the charge", false, codes.Internal},
		{"an answer after the deadline", true, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charges.Store(0)
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				if _, err := dep.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "charge"}); err != nil {
					return nil, err
				}
				<-ctx.Done()
				if tc.answers {
					return &inventoryv1.ReserveStockResponse{ReservationId: "r-charged"}, nil
				}
				return nil, status.Errorf(codes.Internal, "writing the receipt: %v", ctx.Err())
			}
			g, client, _ := guarded(t, srv, []*policy.Server{pol})
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-charge", Sku: "a", Units: 1}
			// The server's copy of the deadline may end first, and the
			// handler's ending reach the caller before its own.
			if _, err := client.ReserveStock(withKey(ctxTimeout(t, 150*time.Millisecond), "k-charge"), req); status.Code(err) != codes.DeadlineExceeded && status.Code(err) != tc.want {
				t.Fatalf("the first attempt: %v; want its deadline (or %s)", err, tc.want)
			}
			var trailer metadata.MD
			eventually(t, "the first attempt's outcome is kept", func() bool {
				trailer = nil
				_, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-charge"), req, grpc.Trailer(&trailer))
				return status.Code(err) == tc.want && len(trailer.Get(ReplayedHeader)) == 1
			})
			if n, c := srv.reserveCalls.Load(), charges.Load(); n != 1 || c != 1 {
				t.Errorf("the handler ran %d times, charged %d; want 1 and 1", n, c)
			}
			if s := stats(t, g); s.Replayed == 0 {
				t.Errorf("no replay")
			}
		})
	}
}
