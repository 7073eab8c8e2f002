package runtime_test

// Attacks on hedging against the caller's deadline (README, "Hedging",
// "Deadlines"): a deadline shorter than the hedge delay sends no copy,
// and the call ends at the deadline, its copy cancelled on the server.

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack22aDeadlineShorterThanTheHedgeDelaySendsOneCopy: GetStock
// hedged after 2 s, up to 3 copies, against a server that never
// answers, called with a 60 ms deadline. The caller gets
// DEADLINE_EXCEEDED at its deadline (not at the copy's 5 s timeout nor
// the next delay; the bound leaves a loaded machine ~1 s of slack), the server saw one call and its cancellation, and nothing
// is held afterwards.
func TestAttack22aDeadlineShorterThanTheHedgeDelaySendsOneCopy(t *testing.T) {
	atkNoLeak(t)
	never := make(chan struct{})
	srv, cc := startFault(t, atkHold(never))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Timeout, m.OverallTimeout = 5*time.Second, 0
		m.Hedging = &policy.Hedging{Delay: 2 * time.Second, MaxCopies: 3}
		p.AdaptiveLimit, p.ClientThrottle = nil, nil
		m.AdaptiveLimit = nil
	})
	const deadline = 60 * time.Millisecond
	for i := range 3 {
		begin := time.Now() // before the deadline is set: took is never below it
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		took := time.Since(begin)
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call %d: %v, want DEADLINE_EXCEEDED", i+1, err)
		}
		if took < deadline || took > deadline+time.Second {
			t.Errorf("call %d took %v, want its deadline %v (the hedge delay is 2s)", i+1, took, deadline)
		}
	}
	atkWaitFor(t, "the server sees each call end", func() bool { return srv.InFlight() == 0 })
	if n := srv.Calls(atkGetStock); n != 3 {
		t.Errorf("the server saw %d calls, want 3: one copy per call", n)
	}
	if n := srv.Cancelled(atkGetStock); n != 3 {
		t.Errorf("the server saw %d calls cancelled, want 3", n)
	}
	atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after the calls ended")
}
