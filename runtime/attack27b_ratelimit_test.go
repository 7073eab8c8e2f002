package runtime_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack27BWaitersThatLeaveNeverLetMoreThanTheRateThrough: README,
// Rate limit: a caller that gives up waiting gives its place to those
// behind it, and no more are admitted than the rate. 48 callers call in a
// loop for 600 ms against a bucket of 2 refilled at 20/s, each may wait up
// to 1 s, and each cancels its call after a random 0 to 120 ms: most of
// them leave while waiting, in every order against the waiters queued
// behind and before them. Whatever the order, the server sees no more
// than the bucket and the refill of the time the storm lasted, and at
// least half of that: the tokens go to those who still wait. With
// golang.org/x/time/rate, whose cancellation gives back only what no
// later reservation depends on, the tokens of those who left went to
// nobody, kept the bucket a max_wait in debt, every newcomer's token lay
// past its patience, and only the bucket's 2 or 3 went out in 600 ms,
// where 14 were allowed.
func TestAttack27BWaitersThatLeaveNeverLetMoreThanTheRateThrough(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 20, Burst: 2, MaxWait: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
	})
	took := atkStorm(48, 600*time.Millisecond, func() {
		ctx, cancel := context.WithCancel(context.Background())
		t := time.AfterFunc(time.Duration(rand.IntN(120))*time.Millisecond, cancel)
		_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		t.Stop()
		cancel()
	})
	sent, most := fs.Calls(atkGetStock), 2+int(took.Seconds()*20)+1
	if sent > most {
		t.Errorf("the server saw %d calls in %v from waiters that leave, a bucket of 2 at 20/s allows %d", sent, took, most)
	}
	if sent < most/2 {
		t.Errorf("the server saw %d calls in %v, want at least half the %d allowed: the tokens of those who left went to nobody", sent, took, most)
	}
}
