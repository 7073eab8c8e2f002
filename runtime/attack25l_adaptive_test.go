package runtime_test

// Attacks on the adaptive concurrency limit's promises (README, "Adaptive
// concurrency limit", "With the bulkhead") against a real loopback server
// that hangs.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack25lTheLimitStaysBetweenMinLimitAndThePermits: a bulkhead of 8
// (max_wait 0), an adaptive limit with min_limit 3 and the other values
// left to their defaults (initial 20 and max 100, both taken down to the
// 8 permits), against a server that hangs every call, 400 ms attempts.
// Bursts of 8 callers at once: the first sends 8 attempts (the ceiling,
// not 20), whose timeouts halve the limit once, to 4; the next sends 4
// and refuses 4 at once (ErrConcurrencyLimited, RESOURCE_EXHAUSTED),
// its timeouts taking the limit to 3, not 2; from then on every burst
// sends 3 and refuses 5, the limit held at min_limit. The server never
// has more attempts in flight than the limit allowed.
func TestAttack25lTheLimitStaysBetweenMinLimitAndThePermits(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Hang)
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, func(p *policy.Service) {
		p.Breaker, p.ClientThrottle, p.Budget = nil, nil, nil
		p.Bulkhead = &policy.Bulkhead{Permits: 8}
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 3}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 400*time.Millisecond, 0
	})
	limit := func() int {
		return int(metricValue(t, reg, "resilient_client_adaptive_limit", "dependency", "example.inventory.v1.InventoryService"))
	}
	if got := limit(); got != 8 {
		t.Fatalf("initial limit %d, want the 8 permits (the default 20 taken down to them)", got)
	}
	for burst, want := range []struct{ sent, after int }{{8, 4}, {4, 3}, {3, 3}, {3, 3}} {
		// The server learns of the last burst's timeouts a moment after the client.
		atkWaitFor(t, "the last burst's attempts ended at the server", func() bool { return fs.InFlight() == 0 })
		before := fs.Calls(atkGetStock)
		gate := make(chan struct{})
		var wg sync.WaitGroup
		var timedOut, limited atomic.Int32
		for range 8 {
			wg.Go(func() {
				<-gate
				switch err := atk25lGet(context.Background(), c); {
				case errors.Is(err, runtime.ErrConcurrencyLimited) && status.Code(err) == codes.ResourceExhausted:
					limited.Add(1)
				case errors.Is(err, runtime.ErrAttemptTimeout) && status.Code(err) == codes.DeadlineExceeded:
					timedOut.Add(1)
				default:
					t.Errorf("burst %d: %v", burst+1, err)
				}
			})
		}
		close(gate)
		wg.Wait()
		sent := fs.Calls(atkGetStock) - before
		if sent != want.sent || int(timedOut.Load()) != want.sent || int(limited.Load()) != 8-want.sent {
			t.Errorf("burst %d: %d sent, %d timed out, %d refused by the limit; want %d, %d, %d",
				burst+1, sent, timedOut.Load(), limited.Load(), want.sent, want.sent, 8-want.sent)
		}
		if got := limit(); got != want.after {
			t.Errorf("limit after burst %d: %d, want %d", burst+1, got, want.after)
		}
	}
	if m := fs.MaxInFlight(); m > 8 {
		t.Errorf("server had %d attempts in flight, above the 8 permits", m)
	}
	atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken at the end")
}
