package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestABulkheadRefusalGivesTheRateLimitTokenBack: README, Rate limit: the
// bucket is "on the calls the client sends". A bucket of 2 refilled at
// 0.5/s (a token per 2 s) and no wait; a bulkhead of 1 permit, no wait.
// Call A takes a token and the permit and hangs; call B takes the second
// token and is refused by the bulkhead (RESOURCE_EXHAUSTED, ErrBulkheadFull):
// it was not sent, so its token goes back. A is released; C must find
// that token at once. Before, B's token was spent, and C was refused by
// the rate limit for the 2 s until the next one; the server saw A only.
func TestABulkheadRefusalGivesTheRateLimitTokenBack(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, atkHold(release))
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.5, Burst: 2}
		p.Bulkhead = &policy.Bulkhead{Permits: 1}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
	})
	get := func() error {
		_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		return err
	}
	a := make(chan error, 1)
	go func() { a <- get() }()
	for deadline := time.Now().Add(2 * time.Second); fs.Calls(atkGetStock) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("call A never reached the server")
		}
	}
	if err := get(); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("call B with the only permit taken: %v, want the bulkhead's refusal", err)
	}
	close(release)
	if err := <-a; err != nil {
		t.Fatalf("call A: %v", err)
	}
	if err := get(); err != nil {
		t.Errorf("call C after A, with B's token given back: %v, want an answer (errors.Is ErrRateLimited: %v)", err, errors.Is(err, runtime.ErrRateLimited))
	}
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Errorf("the server saw %d calls, want 2 (A and C)", n)
	}
}
