package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestNewGuardRefusesTheCallersEndingAsAFinalCode: NewGuard refuses a
// dedup that would keep CANCELLED or DEADLINE_EXCEEDED as a request's
// outcome, in the policy given and in one a WithPolicy edit makes,
// naming the method and why.
func TestNewGuardRefusesTheCallersEndingAsAFinalCode(t *testing.T) {
	const where = "Methods[1] (/example.inventory.v1.InventoryService/ReserveStock).Dedup.FinalCodes: holds "
	for _, c := range []codes.Code{codes.Canceled, codes.DeadlineExceeded} {
		p := inventoryPolicy()
		p.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(c)
		_, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(1)))
		if err == nil || !strings.Contains(err.Error(), where) {
			t.Errorf("FinalCodes with %v: NewGuard: %v, want it refused at %q", c, err, where)
		}
		if err != nil && !strings.Contains(err.Error(), "replayed to every retry of the key for the whole TTL") {
			t.Errorf("FinalCodes with %v: %v, want why", c, err)
		}
		_, err = NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(1)),
			WithPolicy(inventory, func(p *policy.Server) { p.Methods[1].Dedup.FinalCodes |= policy.CodesOf(c) }))
		if err == nil || !strings.Contains(err.Error(), where) {
			t.Errorf("FinalCodes with %v by an edit: NewGuard: %v, want it refused at %q", c, err, where)
		}
	}
}

// TestCallersDeadlineIsNotKeptAsTheOutcome: with the default final
// codes, a request whose caller's deadline passed while it ran is not
// kept: its retry, with time enough, runs the handler again and gets its
// answer, not the first attempt's DEADLINE_EXCEEDED. (Which is what a
// FinalCodes holding DEADLINE_EXCEEDED, refused above, would replay for
// the whole TTL.)
func TestCallersDeadlineIsNotKeptAsTheOutcome(t *testing.T) {
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if srv.reserveCalls.Load() == 1 {
			<-ctx.Done() // the first run outlasts its caller's deadline
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
	}
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1}
	keyed := func(d time.Duration) context.Context {
		return metadata.AppendToOutgoingContext(ctxTimeout(t, d), runtime.IdempotencyKeyHeader, "o-1")
	}
	if _, err := client.ReserveStock(keyed(100*time.Millisecond), req); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the first attempt: %v, want DEADLINE_EXCEEDED", err)
	}
	resp, err := client.ReserveStock(keyed(2*time.Second), req)
	if err != nil || resp.GetReservationId() != "r-o-1" {
		t.Fatalf("the retry: %v, %v, want the reservation", resp, err)
	}
	if n := srv.reserveCalls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2: the first ended by its caller's deadline, the retry", n)
	}
}
