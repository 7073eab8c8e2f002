package runtime_test

// Attack on the retry budget's "a request counted when its first attempt
// starts", with nothing counted for what never reached the dependency: a
// hedged call whose first copy the open breaker refuses sent nothing, and
// may not raise the allowance of the retries that other calls make.
// Otherwise an outage long enough to keep the breaker open fills the
// budget with requests that never went out, and the first calls after it
// retry as if the dependency had been serving them.

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestAttackR18HedgedCallsRefusedByTheBreakerAddNoRequestToTheBudget(t *testing.T) {
	atkNoLeak(t)
	// The server gives up itself (DEADLINE_EXCEEDED): a failure for the
	// breaker, fatal for the hedge (not the copy's own timeout), so each
	// GetStock call sends one copy and takes no retry.
	fs, cc := startFault(t, server.Fail(codes.DeadlineExceeded))
	clock := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}},
		func(p *policy.Service) {
			p.Breaker = nil // ReserveStock has none: the budget alone bounds its retries
			p.Budget = &policy.Budget{Ratio: 0.5, MinRetries: 0, Window: time.Minute}
			g := atkMethod(p, atkGetStock)
			g.Retry = nil
			g.Hedging = &policy.Hedging{Delay: 100 * time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
			g.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Minute, CoolDown: time.Hour,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.DeadlineExceeded, codes.Unavailable)}
			r := atkMethod(p, "/example.inventory.v1.InventoryService/ReserveStock")
			r.Retry.InitialBackoff, r.Retry.MaxBackoff = time.Millisecond, time.Millisecond
		})
	get := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		return err
	}
	// Two requests that reached the dependency open GetStock's breaker.
	for range 2 {
		if err := get(); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("GetStock: %v, want the server's DEADLINE_EXCEEDED", err)
		}
	}
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "GetStock's breaker is %v after 2 failures, want open")
	// Twenty refused at once: nothing sent.
	for range 20 {
		if err := get(); !errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("GetStock on an open breaker: %v, want ErrCircuitOpen", err)
		}
	}
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Fatalf("the server saw %d GetStock calls, want 2", n)
	}

	// ReserveStock fails UNAVAILABLE; 3 attempts allowed, keyed. Requests
	// that reached the dependency: 2 GetStock + this one = 3, so the
	// budget allows floor(0.5 × 3) = 1 retry: 2 attempts. Counting the 20
	// refused calls would allow 11, and all 3 attempts would go.
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "apple", Units: 1})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("ReserveStock: %v, want UNAVAILABLE", err)
	}
	if n := fs.Calls("/example.inventory.v1.InventoryService/ReserveStock"); n != 2 {
		t.Errorf("the server saw %d ReserveStock attempts, want 2: the budget counted the hedged calls the breaker refused as requests", n)
	}
}
