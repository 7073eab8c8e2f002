package runtime_test

// Attacks on how a hedged call ends (README, Hedging: "The call ends so
// as soon as no copy is in flight and none may be sent, whichever event
// stopped them: a copy's result, or the timer of the delay or of a
// positive pushback, at whose end the next copy is refused"), for the
// refusal TestAttack29BPushedHedgeRefusedBy... leave out: an adaptive
// layer's.

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack29DPushedHedgeRefusedByTheAdaptiveLimitEndsAtOnce: README,
// Hedging: "When a further copy was refused so (by the budget, the open
// breaker, or an adaptive layer) and the copies sent failed, the call
// returns the last real error, matching the refusal's sentinel too (...,
// ErrConcurrencyLimited)", and the sentence above. An adaptive limit held
// at 1 (min = max = initial); call A's first copy fails UNAVAILABLE
// (non-fatal) with a 300 ms pushback, which frees the limit's one place;
// call B then takes that place and holds it at the server. At the
// pushback's end A's second copy is refused by the limit: nothing is in
// flight, and the budget (ample) would allow a third copy, but a refusal
// by an adaptive layer stops further copies. A must end then, some 300 ms
// after it began, not at its 2 s deadline, matching
// ErrConcurrencyLimited with the server's UNAVAILABLE as its cause; the
// server sees A once.
func TestAttack29DPushedHedgeRefusedByTheAdaptiveLimitEndsAtOnce(t *testing.T) {
	atkNoLeak(t)
	const pushback = 300 * time.Millisecond
	release := make(chan struct{})
	bArrived := make(chan struct{}, 1)
	fs, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-b")) > 0 {
			bArrived <- struct{}{}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return atkPushback("300")(ctx, c)
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.ClientThrottle = nil, nil, nil
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1}
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
		m.Hedging = &policy.Hedging{Delay: 5 * time.Second, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})

	type result struct {
		err  error
		took time.Duration
	}
	aDone := make(chan result, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		aDone <- result{err, time.Since(start)}
	}()
	atkWaitFor(t, "A's first copy reaches the server", func() bool { return fs.Calls(atkGetStock) >= 1 })

	// B takes the limit's place once A's first copy has left it: tried
	// again while it is refused, until it waits at the server.
	bCtx, bCancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-b", "1"))
	defer bCancel()
	bDone := make(chan error, 1)
	holding := false
	for tries := 0; !holding && time.Since(start) < pushback*2/3; tries++ {
		go func() {
			_, err := c.GetStock(bCtx, &inventoryv1.GetStockRequest{Sku: "pear"})
			bDone <- err
		}()
		select {
		case <-bArrived:
			holding = true
		case err := <-bDone:
			if !errors.Is(err, runtime.ErrConcurrencyLimited) {
				t.Fatalf("call B: %v, want to hold the limit or be refused by it", err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if !holding {
		t.Skipf("B did not take the limit's place within %v of A's start (a loaded machine): the test proves nothing", pushback*2/3)
	}

	var a result
	select {
	case a = <-aDone:
	case <-time.After(3 * time.Second):
		t.Fatal("call A had not returned 3 s after it began, past its 2 s deadline")
	}
	close(release)
	if err := <-bDone; err != nil {
		t.Errorf("call B, released: %v", err)
	}
	var re *runtime.Error
	t.Logf("A: %v after %v", a.err, a.took.Round(time.Millisecond))
	if !errors.Is(a.err, runtime.ErrConcurrencyLimited) || !errors.As(a.err, &re) || status.Code(re.Cause) != codes.Unavailable {
		t.Errorf("A got %v; want a refusal matching ErrConcurrencyLimited whose cause is the first copy's UNAVAILABLE", a.err)
	}
	if a.took > pushback+400*time.Millisecond {
		t.Errorf("A took %v: nothing was in flight once its second copy was refused at the %v pushback's end", a.took, pushback)
	}
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Errorf("the server saw %d calls, want 2 (A's first copy and B)", n)
	}
}
