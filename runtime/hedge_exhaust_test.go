package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack30ShedCopyAfterTheLastCopyWasSentStillExhausts: a hedged
// method of three copies, 10 ms apart, all sent before any answers. The
// first copy is refused with RESOURCE_EXHAUSTED (fatal for this policy)
// and a pushback, the server shedding the extra load while the others are
// in flight; the other two fail UNAVAILABLE (non-fatal). README, Hedging:
// "a pushback that stops copies the policy would still have sent leaves
// the last failure without that sentinel"; this one stops none (all three
// were sent), so every copy the policy allows was made and the error
// matches ErrRetriesExhausted, as the same call without the pushback
// does, and as runtime/server's Guard reads to mark its own failure
// do-not-retry. Before, the refusal stopped the call regardless, and it
// returned the bare UNAVAILABLE, which a Guard upstream does not mark:
// its caller would retry a call already repeated three times below.
func TestAttack30ShedCopyAfterTheLastCopyWasSentStillExhausts(t *testing.T) {
	atkNoLeak(t)
	for _, pushback := range []string{"", "50"} {
		t.Run("the first copy's pushback "+pushback, func(t *testing.T) {
			fs, cc := startFault(t, func(ctx context.Context, c server.Call) error {
				if c.N == 1 {
					if err := server.Wait(ctx, 300*time.Millisecond); err != nil {
						return err
					}
					if pushback == "" {
						return status.Error(codes.Unavailable, "copy 1 fails")
					}
					if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, pushback)); err != nil {
						return err
					}
					return status.Error(codes.ResourceExhausted, "copy 1 shed with a pushback")
				}
				if err := server.Wait(ctx, 400*time.Millisecond); err != nil {
					return err
				}
				return status.Errorf(codes.Unavailable, "copy %d fails", c.N)
			})
			readyConn(t, cc)
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
				p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
				p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
				m := atkMethod(p, atkGetStock)
				m.Timeout, m.OverallTimeout, m.Retry = 2*time.Second, 0, nil
				m.Hedging = &policy.Hedging{Delay: 10 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			if n := fs.Calls(atkGetStock); n != 3 {
				t.Fatalf("the server saw %d copies, want the 3 the policy allows, all sent before the first answer", n)
			}
			if status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrRetriesExhausted) {
				t.Errorf("3 of 3 copies failed (the first with RESOURCE_EXHAUSTED and pushback %q): got %v "+
					"(matches ErrRetriesExhausted: %v), want the last UNAVAILABLE matching ErrRetriesExhausted",
					pushback, err, errors.Is(err, runtime.ErrRetriesExhausted))
			}
		})
	}
}
