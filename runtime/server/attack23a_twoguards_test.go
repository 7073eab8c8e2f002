package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack23aRequestChangedBetweenTwoGuardsOnOneStore: "where the two
// stores share their keys the inner one finds the outer's claim pending
// under the outer's own owner token, held for this very request, and
// passes the request on". Two Guards deduplicating ReserveStock on one
// store, an interceptor of the server's own between them that normalizes
// the request (the SKU upper-cased). The inner Guard found the outer's
// claim with the fingerprint of the request as it arrived, took it for
// another request's and refused INVALID_ARGUMENT ("already used by a
// different request"), which the outer kept: the handler never ran, and
// every retry of the key got that refusal replayed for the whole TTL.
// The request runs once, its retry replayed.
func TestAttack23aRequestChangedBetweenTwoGuardsOnOneStore(t *testing.T) {
	g1, g2 := twoGuardsOnOneStore(t)
	srv := &inventoryServer{}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(g1.TapHandle),
		grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, upperSku, g2.UnaryInterceptor))))
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-norm", Sku: "abc", Units: 1}
	first, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-norm"), req)
	if err != nil {
		t.Fatalf("ReserveStock: %v; want the handler's answer", err)
	}
	var trailer metadata.MD
	again, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-norm"), req, grpc.Trailer(&trailer))
	if err != nil || again.GetReservationId() != first.GetReservationId() {
		t.Fatalf("its retry: %v, %v; want the replay of %q", again, err, first.GetReservationId())
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if s1, s2 := stats(t, g1), stats(t, g2); s1.Replayed != 1 || s1.Mismatched+s2.Mismatched != 0 {
		t.Errorf("replays by the outer %d, mismatches %d (outer), %d (inner); want 1, 0, 0", s1.Replayed, s1.Mismatched, s2.Mismatched)
	}
	// Another body under the key is still another request's.
	other := &inventoryv1.ReserveStockRequest{OrderId: "o-norm", Sku: "xyz", Units: 1}
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-norm"), other); status.Code(err) != codes.InvalidArgument {
		t.Errorf("another body with the key: %v; want INVALID_ARGUMENT", err)
	}
}

// TestAttack23aInnerGuardsDeadlineBetweenDefaultTimeouts: two Guards whose
// DefaultTimeouts differ, in either order, each with MinDeadline equal to
// its DefaultTimeout: a request sent without a deadline runs under the
// shorter, refused by neither; one whose caller's deadline is exactly a
// DefaultTimeout is the caller's (MinDeadline applies: transit took some
// of it, so a Guard that needs all of it refuses it at its door, marked
// DEADLINE_TOO_SHORT, as one Guard alone does); one with a deadline
// longer than both runs under the caller's.
func TestAttack23aInnerGuardsDeadlineBetweenDefaultTimeouts(t *testing.T) {
	const short, long = 400 * time.Millisecond, 1500 * time.Millisecond
	pol := func(d time.Duration) *policy.Server {
		p := inventoryPolicy()
		p.Methods[0].MinDeadline, p.Methods[0].DefaultTimeout = d, d
		return p
	}
	for _, order := range [][2]time.Duration{{long, short}, {short, long}} {
		t.Run(order[0].String()+" outside "+order[1].String(), func(t *testing.T) {
			srv := &inventoryServer{}
			left := make(chan time.Duration, 1)
			srv.onGet = tellsTimeLeft(left)
			g1, g2, client := twoGuardsOn(t, srv, pol(order[0]), pol(order[1]))
			for i := range 3 {
				if _, err := client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
					t.Fatalf("GetStock %d without a deadline: %v; want the handler's answer", i, err)
				}
				if l := <-left; l <= 0 || l > short {
					t.Errorf("without a deadline the handler had %s left; want at most the shorter DefaultTimeout, %s", l, short)
				}
			}
			if s1, s2 := stats(t, g1), stats(t, g2); s1.DeadlineRefused+s2.DeadlineRefused != 0 {
				t.Fatalf("deadline refusals %d (outer), %d (inner) for requests sent without one; want none", s1.DeadlineRefused, s2.DeadlineRefused)
			}
			// The caller's deadline, exactly the shorter DefaultTimeout:
			// less is left at the outer door than its MinDeadline, at
			// least that DefaultTimeout, which the caller's deadline is
			// not (the outer refuses it, whichever it is).
			_, err := client.GetStock(ctxTimeout(t, short), &inventoryv1.GetStockRequest{Sku: "a"})
			if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(status.Convert(err).Message(), "needs at least "+order[0].String()) {
				t.Errorf("with the caller's deadline of %s: %v; want DEADLINE_EXCEEDED, needs at least %s", short, err, order[0])
			}
			if n, s1 := srv.getCalls.Load(), stats(t, g1); n != 3 || s1.DeadlineRefused != 1 {
				t.Errorf("the handler ran %d times, the outer refused %d; want 3 (the refused request not run) and 1", n, s1.DeadlineRefused)
			}
			// The caller's deadline, longer than both: the caller's.
			if _, err := client.GetStock(ctxTimeout(t, 3*long), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
				t.Fatalf("with a deadline of %s: %v", 3*long, err)
			}
			if l := <-left; l <= long || l > 3*long {
				t.Errorf("with the caller's deadline of %s the handler had %s left; want the caller's, more than either DefaultTimeout", 3*long, l)
			}
		})
	}
}

// TestAttack23aHandlersLookAlikeShedIsKept: refusedHere knows an inner
// Guard's refusal by its type, not its look. Two Guards, the outer
// deduplicating with RESOURCE_EXHAUSTED among its FinalCodes (a service
// whose quota answers are final), the inner shedding nothing; the
// handler answers a status made exactly like a Guard's shed (the code,
// a RetryInfo, the SHED mark in the Guard's domain), as a handler that
// passes on its dependency's refusal does. It is the handler's answer:
// kept, the mark taken out, and replayed to the retry, the handler run
// once.
func TestAttack23aHandlersLookAlikeShedIsKept(t *testing.T) {
	outer := inventoryPolicy()
	outer.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.ResourceExhausted)
	inner := inventoryPolicy()
	inner.Methods[1].Dedup = nil
	inner.Shedding.Code = codes.ResourceExhausted
	lookAlike := newShedder(inventory, inner.Shedding).refusal(reserveStock, PriorityCritical, 8, 8)
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		return nil, status.ErrorProto(status.Convert(lookAlike).Proto()) // the same status, another error
	}
	g1, g2, client := twoGuardsOn(t, srv, outer, inner)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-alike", Sku: "a", Units: 1}
	_, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-alike"), req)
	if status.Code(err) != codes.ResourceExhausted || reasons(err)[runtime.ShedReason] {
		t.Fatalf("the handler's look-alike: %v (reasons %v); want RESOURCE_EXHAUSTED without the SHED mark (not this server's refusal)", err, reasons(err))
	}
	var trailer metadata.MD
	_, again := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-alike"), req, grpc.Trailer(&trailer))
	if status.Code(again) != codes.ResourceExhausted || status.Convert(again).Message() != status.Convert(err).Message() || trailer.Get(ReplayedHeader) == nil {
		t.Errorf("the retry: %v (trailer %v); want the answer replayed", again, trailer)
	}
	if n, s1, s2 := srv.reserveCalls.Load(), stats(t, g1), stats(t, g2); n != 1 || s1.Replayed != 1 || s2.Shed[PriorityCritical] != 0 {
		t.Errorf("the handler ran %d times, outer replays %d, inner sheds %d; want 1, 1, 0", n, s1.Replayed, s2.Shed[PriorityCritical])
	}
}

// tellsTimeLeft is a GetStock handler that sends the time its context
// leaves it on left (-1 for no deadline) and answers.
func tellsTimeLeft(left chan<- time.Duration) func(context.Context, *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	return func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		if dl, ok := ctx.Deadline(); ok {
			left <- time.Until(dl)
		} else {
			left <- -1
		}
		return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
	}
}
