package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack23sBareContextErrorIsNotKept: "a request ended by its
// caller's cancellation or deadline (CANCELLED, DEADLINE_EXCEEDED, the
// server's DefaultTimeout included) is not kept: its retry runs the
// handler again". A handler that returns its context's error as Go gives
// it (ctx.Err(), or wrapped with %w) is answered by gRPC with CANCELLED or
// DEADLINE_EXCEEDED, but the Guard judged it by status.Code, UNKNOWN: under
// a FinalCodes holding UNKNOWN (a service whose plain Go errors are its
// answers) it was kept, and the retry got UNKNOWN "context canceled"
// replayed, the handler run once. A plain Go error is still kept and
// replayed as UNKNOWN.
func TestAttack23sBareContextErrorIsNotKept(t *testing.T) {
	pol := func() *policy.Server {
		p := inventoryPolicy()
		p.Methods[1].DefaultTimeout = 200 * time.Millisecond
		p.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.Unknown)
		return p
	}
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-ctx", Sku: "a", Units: 1}
	for _, tc := range []struct {
		name    string
		first   func(ctx context.Context) error
		timeout time.Duration // of the first attempt; 0: none, the DefaultTimeout ends it
	}{
		{"ctx.Err() at the caller's deadline", func(ctx context.Context) error { return ctx.Err() }, 100 * time.Millisecond},
		{"ctx.Err() wrapped at the DefaultTimeout", func(ctx context.Context) error { return fmt.Errorf("reserve: %w", ctx.Err()) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				if srv.reserveCalls.Load() == 1 {
					<-ctx.Done()
					return nil, tc.first(ctx)
				}
				return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
			}
			g, client, _ := guarded(t, srv, []*policy.Server{pol()})
			ctx := context.Background()
			if tc.timeout > 0 {
				ctx = ctxTimeout(t, tc.timeout)
			}
			_, err := client.ReserveStock(withKey(ctx, "k-ctx"), req)
			if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Canceled {
				t.Fatalf("the first attempt: %v; want DEADLINE_EXCEEDED (or CANCELLED, gRPC's own end of it)", err)
			}
			resp, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-ctx"), req)
			if err != nil || resp.GetReservationId() != "r-o-ctx" {
				t.Fatalf("the retry: %v, %v; want the handler's answer, not the first attempt's end replayed", resp, err)
			}
			if n := srv.reserveCalls.Load(); n != 2 {
				t.Errorf("the handler ran %d times, want 2", n)
			}
			if s := stats(t, g); s.Replayed != 0 {
				t.Errorf("%d replays, want 0", s.Replayed)
			}
		})
	}
	t.Run("a plain Go error is kept as UNKNOWN", func(t *testing.T) {
		srv := &inventoryServer{}
		srv.onReserve = func(context.Context, *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
			return nil, errors.New("out of stock")
		}
		g, client, _ := guarded(t, srv, []*policy.Server{pol()})
		for i := range 2 {
			_, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-plain"), req)
			if st := status.Convert(err); st.Code() != codes.Unknown || st.Message() != "out of stock" {
				t.Fatalf("attempt %d: %v; want UNKNOWN \"out of stock\"", i, err)
			}
		}
		if n, r := srv.reserveCalls.Load(), stats(t, g).Replayed; n != 1 || r != 1 {
			t.Errorf("the handler ran %d times, %d replays; want 1 and 1", n, r)
		}
	})
}

// TestAttack23sDoNotRetryKeepsAContextErrorsCode: "DoNotRetry: err keeps
// its code". Given a bare context error, it made an UNKNOWN of what gRPC
// would have answered DEADLINE_EXCEEDED; the caller now gets
// DEADLINE_EXCEEDED with the mark.
func TestAttack23sDoNotRetryKeepsAContextErrorsCode(t *testing.T) {
	if c := status.Code(DoNotRetry(fmt.Errorf("stock: %w", context.DeadlineExceeded))); c != codes.DeadlineExceeded {
		t.Errorf("DoNotRetry of a wrapped context.DeadlineExceeded: %s, want DEADLINE_EXCEEDED", c)
	}
	srv := &inventoryServer{}
	srv.onGet = func(ctx context.Context, _ *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		return nil, DoNotRetry(fmt.Errorf("stock: %w", context.DeadlineExceeded))
	}
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	var trailer metadata.MD
	_, err := client.GetStock(ctxTimeout(t, 2*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.DeadlineExceeded || !IsDoNotRetry(err) {
		t.Errorf("%v; want DEADLINE_EXCEEDED marked do-not-retry", err)
	}
	if v := trailer.Get(PushbackHeader); len(v) != 1 || v[0] != "-1" {
		t.Errorf("trailer %s: %q, want [-1]", PushbackHeader, v)
	}
}
