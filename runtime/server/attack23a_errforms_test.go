package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// nilStatusErr is an error whose GRPCStatus is nil (gRPC answers it
// UNKNOWN, or the code of the context error it wraps).
type nilStatusErr struct{ wrapped error }

func (e nilStatusErr) Error() string              { return "nil status: " + fmt.Sprint(e.wrapped) }
func (e nilStatusErr) GRPCStatus() *status.Status { return nil }
func (e nilStatusErr) Unwrap() error              { return e.wrapped }

// okStatusErr is an error whose status has code OK and a message.
type okStatusErr struct{}

func (okStatusErr) Error() string              { return "fine, really" }
func (okStatusErr) GRPCStatus() *status.Status { return status.New(codes.OK, "fine, really") }

// multiErr unwraps to several errors, as errors.Join does, but is a type
// of its own.
type multiErr []error

func (m multiErr) Error() string   { return fmt.Sprintf("%d errors", len(m)) }
func (m multiErr) Unwrap() []error { return m }

// TestAttack23aEveryWayAHandlerFailsIsKeptAsSent: "a handler's error is
// judged by the code gRPC answers for it" and "the replay is exact". A
// deduplicated method whose FinalCodes hold every code Validate accepts,
// its handler failing its first run in each way a Go error can carry a
// status (or none): the first caller's answer, as gRPC's server sent it,
// is replayed to the retry with its code and message, the handler run
// once, exactly when its code is one FinalCodes hold; otherwise the
// retry runs the handler and gets its answer.
func TestAttack23aEveryWayAHandlerFailsIsKeptAsSent(t *testing.T) {
	var final policy.CodeSet
	for c := codes.Code(1); c <= 16; c++ {
		if c != codes.Canceled && c != codes.DeadlineExceeded {
			final |= policy.CodesOf(c)
		}
	}
	notFound := status.Error(codes.NotFound, "no such order")
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code // what the first caller gets
		kept bool
	}{
		{"a status made from ctx.Err()", status.FromContextError(context.Canceled).Err(), codes.Canceled, false},
		{"UNKNOWN saying context canceled", status.Error(codes.Unknown, context.Canceled.Error()), codes.Unknown, true},
		{"a status wrapped with %w", fmt.Errorf("reserve: %w", notFound), codes.NotFound, true},
		{"errors.Join of a Go error and a status", errors.Join(errors.New("first"), notFound), codes.NotFound, true},
		{"errors.Join of context.Canceled and a status", errors.Join(context.Canceled, notFound), codes.NotFound, true},
		{"errors.Join of a deadline and a Go error", errors.Join(context.DeadlineExceeded, errors.New("x")), codes.DeadlineExceeded, false},
		{"two %w, a cancellation and UNAVAILABLE", fmt.Errorf("%w; %w", context.Canceled, status.Error(codes.Unavailable, "down")), codes.Unavailable, true},
		{"Unwrap() []error: ErrLeaseLost and a status", multiErr{ErrLeaseLost, notFound}, codes.NotFound, true},
		{"Unwrap() []error: ErrLeaseLost and a Go error", multiErr{errors.New("x"), ErrLeaseLost}, codes.Canceled, false},
		{"ErrLeaseLost wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", ErrLeaseLost)), codes.Canceled, false},
		{"GRPCStatus() nil", nilStatusErr{}, codes.Unknown, true},
		{"GRPCStatus() nil, wrapping ctx.Err()", nilStatusErr{context.Canceled}, codes.Canceled, false},
		{"GRPCStatus() nil, wrapped with %w", fmt.Errorf("w: %w", nilStatusErr{context.DeadlineExceeded}), codes.DeadlineExceeded, false},
		{"a code gRPC has no name for", status.ErrorProto(&spb.Status{Code: 99, Message: "odd"}), codes.Code(99), false},
		{"a plain Go error", errors.New("boom"), codes.Unknown, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := inventoryPolicy()
			p.Methods[1].Dedup.FinalCodes = final
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				if srv.reserveCalls.Load() == 1 {
					return nil, tc.err
				}
				return &inventoryv1.ReserveStockResponse{ReservationId: "r-2"}, nil
			}
			g, client, _ := guarded(t, srv, []*policy.Server{p})
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-forms", Sku: "a", Units: 1}
			_, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-forms"), req)
			first := status.Convert(err)
			if first.Code() != tc.want {
				t.Fatalf("the first caller got %v; want %v", err, tc.want)
			}
			var trailer metadata.MD
			resp, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-forms"), req, grpc.Trailer(&trailer))
			runs, replayed := srv.reserveCalls.Load(), stats(t, g).Replayed
			if tc.kept {
				again := status.Convert(err)
				if again.Code() != first.Code() || again.Message() != first.Message() || runs != 1 || replayed != 1 || trailer.Get(ReplayedHeader) == nil {
					t.Errorf("the retry got %v (%d runs, %d replays, trailer %v); want %v %q replayed, the handler run once", err, runs, replayed, trailer, first.Code(), first.Message())
				}
				return
			}
			if err != nil || resp.GetReservationId() != "r-2" || runs != 2 || replayed != 0 {
				t.Errorf("the retry got %v, %v (%d runs, %d replays); want the second run's answer", resp, err, runs, replayed)
			}
		})
	}
}

// TestAttack23aHandlerErrorWithAnOKStatus: a handler's error whose status
// has code OK (a status built with codes.OK and a message) makes gRPC's
// server send OK without the response; it is not an outcome to keep, and
// the retry runs the handler.
func TestAttack23aHandlerErrorWithAnOKStatus(t *testing.T) {
	var final policy.CodeSet
	for c := codes.Code(1); c <= 16; c++ {
		if c != codes.Canceled && c != codes.DeadlineExceeded {
			final |= policy.CodesOf(c)
		}
	}
	p := inventoryPolicy()
	p.Methods[1].Dedup.FinalCodes = final
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if srv.reserveCalls.Load() == 1 {
			return &inventoryv1.ReserveStockResponse{ReservationId: "r-1"}, okStatusErr{}
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-2"}, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{p})
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-ok", Sku: "a", Units: 1}
	// gRPC's client takes OK without a response for INTERNAL.
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-ok"), req); status.Code(err) != codes.Internal {
		t.Fatalf("the first caller got %v; want gRPC's INTERNAL for OK without a response", err)
	}
	resp, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-ok"), req)
	if runs, replayed := srv.reserveCalls.Load(), stats(t, g).Replayed; err != nil || resp.GetReservationId() != "r-2" || runs != 2 || replayed != 0 {
		t.Errorf("the retry got %v, %v (%d runs, %d replays); want the second run's answer", resp, err, runs, replayed)
	}
}
