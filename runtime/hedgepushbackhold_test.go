package runtime_test

import (
	"context"
	"sync"
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

// TestAHedgedPushbackHoldsAgainstALaterFailureWithoutOne: README,
// Pushback: "a positive value replaces the backoff"; Hedging: "a copy
// that fails with a non-fatal code sends the next copy at once". A hedged
// call (copies 30 ms apart, 3 at most, UNAVAILABLE non-fatal): copy 1
// fails at 45 ms with a pushback of 300 ms, copy 2 (sent at 30 ms) fails
// at 80 ms without one. The server asked for 300 ms: copy 3 goes at about
// 345 ms, not at once when copy 2 fails (before, it went at 80 ms, the
// later failure without a pushback overruling the server's word), and
// answers. So too when copy 2 fails with a shorter pushback of its own,
// 10 ms: of two pushbacks the longer wait holds.
func TestAHedgedPushbackHoldsAgainstALaterFailureWithoutOne(t *testing.T) {
	for _, second := range []string{"", "10"} {
		t.Run("copy 2's pushback "+second, func(t *testing.T) { atkPushbackHolds(t, second) })
	}
}

// atkPushbackHolds plays TestAHedgedPushbackHoldsAgainstALaterFailureWithoutOne
// with copy 2's pushback second ("" for none).
func atkPushbackHolds(t *testing.T, second string) {
	atkNoLeak(t)
	var mu sync.Mutex
	var seen []time.Duration
	begin := time.Now()
	fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
		mu.Lock()
		seen = append(seen, time.Since(begin))
		mu.Unlock()
		switch call.N {
		case 1:
			if err := server.Wait(ctx, 45*time.Millisecond); err != nil {
				return err
			}
			if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, "300")); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "injected, wait 300 ms")
		case 2:
			if err := server.Wait(ctx, 50*time.Millisecond); err != nil {
				return err
			}
			if second != "" {
				if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, second)); err != nil {
					return err
				}
			}
			return status.Error(codes.Unavailable, "injected, pushback "+second)
		}
		return nil
	})
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 5*time.Second, 0
		m.Hedging = &policy.Hedging{Delay: 30 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	mu.Lock()
	begin = time.Now()
	mu.Unlock()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatalf("the third copy answers: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := fs.Calls(atkGetStock); n != 3 || len(seen) != 3 {
		t.Fatalf("the server saw %d copies (%v), want 3", n, seen)
	}
	if seen[2] < 300*time.Millisecond {
		t.Errorf("copy 3 reached the server at %v (copies at %v): the first copy's pushback asked for 300 ms from 45 ms, "+
			"and copy 2's failure without a pushback sent it at once", seen[2], seen)
	}
}
