package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack30TakeOverShortOfTimeIsNotMarkedTooShort: README, Dead
// requests: "Only the first check, at the door, marks a refusal
// DEADLINE_TOO_SHORT: a request the door admitted whose time ran short
// inside the server (…, the idempotency store) is refused with the
// do-not-retry mark alone, and its callers' breakers count it by its
// code". A repeat admitted at the door with 250 ms (MinDeadline 100 ms)
// waits for the first request, which fails transiently after 160 ms; it
// takes the key over with about 90 ms left and is refused
// DEADLINE_EXCEEDED ("Waiting and taking over"). That refusal reaches its
// client before the client's own deadline, so its details are read: the
// do-not-retry mark, not DEADLINE_TOO_SHORT (the time was spent waiting
// inside the server, not by the caller). TestDedupTakeOverRechecksDeadline
// checks the code only, with a client deadline that may end first.
func TestAttack30TakeOverShortOfTimeIsNotMarkedTooShort(t *testing.T) {
	srv := &inventoryServer{}
	var n atomic.Int64
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		if n.Add(1) == 1 {
			time.Sleep(160 * time.Millisecond)
			return nil, status.Error(codes.Unavailable, "database down")
		}
		return &inventoryv1.ReserveStockResponse{ReservationId: "r"}, nil
	}
	p := inventoryPolicy()
	p.Methods[1].MinDeadline = 100 * time.Millisecond
	g, client, _ := guarded(t, srv, []*policy.Server{p})
	first := make(chan error, 1)
	go func() {
		_, err := reserve(t, client, "o-take")
		first <- err
	}()
	eventually(t, "first running", func() bool { return srv.reserveCalls.Load() == 1 })
	ctx := ctxTimeout(t, 250*time.Millisecond)
	_, err := client.ReserveStock(withKey(ctx, "o-take"), &inventoryv1.ReserveStockRequest{OrderId: "o-take", Sku: "a", Units: 1})
	if ctx.Err() != nil {
		t.Skipf("the client's deadline ended before the server's answer on this machine: %v", err)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("waiter taking over with too little time: %v, want DEADLINE_EXCEEDED", err)
	}
	r := reasons(err)
	if r[runtime.DeadlineReason] {
		t.Errorf("the take-over refusal is marked %s (reasons %v): the time ran short inside the server, not at the door", runtime.DeadlineReason, r)
	}
	if !IsDoNotRetry(err) {
		t.Errorf("the take-over refusal is not marked do-not-retry (reasons %v): %v", r, err)
	}
	if err := <-first; status.Code(err) != codes.Unavailable {
		t.Errorf("first: %v, want its UNAVAILABLE", err)
	}
	if c := srv.reserveCalls.Load(); c != 1 {
		t.Errorf("handler ran %d times, want 1", c)
	}
	eventually(t, "the waiter done on the server", func() bool { return stats(t, g).InFlight == 0 })
	if s := stats(t, g); s.Waited != 1 || s.DeadlineRefused != 1 {
		t.Errorf("stats: waited %d, deadline refused %d; want 1 and 1", s.Waited, s.DeadlineRefused)
	}
	t.Logf("take-over refusal: %v; reasons %v", err, r)
}
