package runtime_test

// Attacks on the interplay of the server's pushback (README, "Pushback")
// with hedging (README, "Hedging") and the retry budget (README, "Retries
// and the retry budget"): a hedged call whose next copy waits for the
// server's positive pushback, and is then refused by the budget.

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk29bHedgedNoBudget is GetStock hedged (a long delay, up to 3 copies,
// UNAVAILABLE non-fatal) under a retry budget that allows no retry at all
// for one request (1 % of one request, rounded down, and no floor).
func atk29bHedgedNoBudget(p *policy.Service) {
	p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
	p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 0, Window: time.Minute}
	m := atkMethod(p, atkGetStock)
	m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
	m.Hedging = &policy.Hedging{Delay: 5 * time.Second, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
}

// TestAttack29BPushedHedgeRefusedByTheBudgetEndsAtOnce: README, Pushback:
// "a positive value replaces the backoff, still within the retry budget";
// Hedging: "When a further copy was refused so (by the budget, ...) and
// the copies sent failed, the call returns the last real error, matching
// the refusal's sentinel too (ErrBudgetExhausted, ...)"; Retries: "A retry
// refused by the budget returns the last real error". A hedged call's
// first copy fails with a non-fatal UNAVAILABLE and a pushback of 20 ms;
// 20 ms later the next copy is refused by a budget that has no retry for
// it. Nothing is in flight and nothing more may be sent: the call must end
// then, some 20 ms after it began, with UNAVAILABLE matching
// ErrBudgetExhausted, not wait for its deadline (800 ms) or, without one,
// for ever.
func TestAttack29BPushedHedgeRefusedByTheBudgetEndsAtOnce(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, atkPushback("20"))
	readyConn(t, cc)

	t.Run("with a deadline", func(t *testing.T) {
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, atk29bHedgedNoBudget)
		before := fs.Calls(atkGetStock)
		ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		took := time.Since(start)
		if n := fs.Calls(atkGetStock) - before; n != 1 {
			t.Errorf("the server saw %d copies, want 1 (the budget holds no retry)", n)
		}
		if status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrBudgetExhausted) {
			t.Errorf("got %v (code %v, matches ErrBudgetExhausted: %v), want the copy's UNAVAILABLE matching ErrBudgetExhausted",
				err, status.Code(err), errors.Is(err, runtime.ErrBudgetExhausted))
		}
		if took > 400*time.Millisecond {
			t.Errorf("the call took %v with nothing in flight after the 20 ms pushback: it waited for its 800 ms deadline", took)
		}
	})

	t.Run("without a deadline", func(t *testing.T) {
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, atk29bHedgedNoBudget)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, runtime.ErrBudgetExhausted) {
				t.Errorf("got %v, want UNAVAILABLE matching ErrBudgetExhausted", err)
			}
		case <-time.After(500 * time.Millisecond):
			cancel()
			err := <-done
			t.Errorf("the call had not ended 500 ms after a 20 ms pushback, nothing in flight; its caller's cancel ended it with %v", err)
		}
	})
}

// TestAttack29BPushedHedgeRefusedByTheBreakerEndsAtOnce: the same call, its
// next copy at the pushback's end refused by the breaker the first copy's
// failure opened (one call is enough), where the budget has retries to
// give. The refusal comes back as the copy's result, and the call ends
// then, with the copy's UNAVAILABLE matching ErrCircuitOpen (README,
// Hedging), not at its deadline.
func TestAttack29BPushedHedgeRefusedByTheBreakerEndsAtOnce(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, atkPushback("20"))
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		atk29bHedgedNoBudget(p)
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second,
			CoolDown: 10 * time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	took := time.Since(start)
	if n := fs.Calls(atkGetStock); n != 1 {
		t.Errorf("the server saw %d copies, want 1 (the breaker refused the second)", n)
	}
	if status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Errorf("got %v, want the copy's UNAVAILABLE matching ErrCircuitOpen", err)
	}
	if took > 400*time.Millisecond {
		t.Errorf("the call took %v with nothing in flight after the 20 ms pushback", took)
	}
}
