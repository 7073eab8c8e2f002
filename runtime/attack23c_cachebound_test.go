package runtime_test

// The feature-pair matrix, the cache's shared call × the bulkhead's wait:
// the README promises that "the shared call makes every attempt or copy
// the annotation allows, as the same call without the cache does". The
// layers put the overall limit inside the bulkhead (rate limit →
// bulkhead → overall limit → retry loop): a call's overall_timeout starts
// once it holds its permit.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack23cSharedCallWaitingForAPermitMakesEveryAttempt: GetStock
// retried (2 attempts of 250 ms) under an overall_timeout of 600 ms, or
// none (the shared call's limit is then its attempts' bound, 501 ms),
// against a server that hangs it; the bulkhead's one permit is held by a
// ReserveStock for 400 ms, well inside its max_wait of 2 s. Without the
// cache, GetStock waits for the permit, then makes its 2 attempts within
// its limit. With the cache, the shared call must do the same: the
// server sees 2 GetStock either way.
func TestAttack23cSharedCallWaitingForAPermitMakesEveryAttempt(t *testing.T) {
	for _, tc := range []struct {
		cached  bool
		overall time.Duration
	}{{false, 600 * time.Millisecond}, {true, 600 * time.Millisecond}, {false, 0}, {true, 0}} {
		cached := tc.cached
		t.Run(fmt.Sprint("cached ", cached, ", overall_timeout ", tc.overall), func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			never := make(chan struct{})
			srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
				if c.Method == atkReserveStock {
					return atkHold(release)(ctx, c)
				}
				return atkHold(never)(ctx, c)
			})
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
				p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
				p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute}
				p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: 2 * time.Second}
				m := atkMethod(p, atkGetStock)
				m.Timeout, m.OverallTimeout = 250*time.Millisecond, tc.overall
				m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
					Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
				if cached {
					m.Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 10, KeyFields: []string{"sku"}}
				}
				r := atkMethod(p, atkReserveStock)
				r.Timeout, r.Retry = 5*time.Second, nil
			})
			readyConn(t, cc)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			held := make(chan error, 1)
			go func() {
				_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "a", Units: 1})
				held <- err
			}()
			atkWaitFor(t, "ReserveStock holds the permit", func() bool { return srv.Calls(atkReserveStock) == 1 })
			done := make(chan error, 1)
			go func() {
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				done <- err
			}()
			time.Sleep(400 * time.Millisecond) // GetStock waits for the permit meanwhile
			if n := srv.Calls(atkGetStock); n != 0 {
				t.Fatalf("the server saw %d GetStock while the permit was held, want 0", n)
			}
			close(release)
			if err := <-held; err != nil {
				t.Fatalf("ReserveStock: %v", err)
			}
			err := <-done
			if n := srv.Calls(atkGetStock); n != 2 {
				t.Errorf("the server saw %d GetStock (the call ended with %v), want 2: both attempts the policy allows once the permit is held", n, err)
			}
			if err == nil {
				t.Error("GetStock against a hung server answered, want a failure")
			} else if !errors.Is(err, runtime.ErrAttemptTimeout) && tc.overall == 0 {
				// Without an overall_timeout, the shared call's limit is
				// the bound of its attempts: cutting the last one, it says
				// so, as that attempt's own timeout does without the cache.
				t.Errorf("GetStock ended with %v, want it to match ErrAttemptTimeout", err)
			}
			atkWantNoPermits(t, c.Runtime(), atkGetStock, "after both calls returned")
		})
	}
}
