package runtime_test

// Attacks on README, "Rate limit": "A cached method's token is taken by
// its shared call, which runs under the method's own limit, not under the
// deadline of any one caller (see Cache): a caller whose deadline comes
// before the token waits for the shared call until that deadline and gets
// DEADLINE_EXCEEDED (or a stale answer), where the same method without a
// cache is refused at once with RESOURCE_EXHAUSTED."

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

// TestAttack29BCachedCallerWhoseDeadlineComesBeforeTheTokenWaitsItOut: two
// clients of one server, each with its own bucket of 1 at 5/s that lets
// a call wait 1 s; GetStock cached on one (fresh 1 h, stale 5 h, on a
// clock of the test's), not on the other. On each, apple takes the token
// (the next is due 200 ms later); then:
//   - without the cache, pear with 60 ms to its deadline is refused at
//     once, RESOURCE_EXHAUSTED matching ErrRateLimited, its RetryAfter
//     past its deadline;
//   - with it, pear with 60 ms waits for its shared call until its
//     deadline and gets DEADLINE_EXCEEDED, not ErrRateLimited; apple,
//     aged past its fresh TTL, with 60 ms, gets the stale apple at its
//     deadline.
//
// Neither shared call reaches the server once its caller left: at
// 250 ms, past the token's 200 ms, each server count is apple's alone.
func TestAttack29BCachedCallerWhoseDeadlineComesBeforeTheTokenWaitsItOut(t *testing.T) {
	atkNoLeak(t)
	const short, slack = 60 * time.Millisecond, 150 * time.Millisecond
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	bucket := policy.RateLimit{RequestsPerSecond: 5, Burst: 1, MaxWait: time.Second}
	clk := newAtkClock()
	cached, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clk), runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
			b := bucket
			p.RateLimit = &b
			m := atkMethod(p, atkGetStock)
			m.Retry, m.Hedging, m.Timeout, m.OverallTimeout = nil, nil, 2*time.Second, 0
			m.Cache.FreshTTL, m.Cache.StaleTTL = time.Hour, 5*time.Hour
		})}})
	if err != nil {
		t.Fatal(err)
	}
	uncached := atk27dClient(t, cc, bucket)

	get := func(c *inventoryv1.InventoryServiceResilientClient, sku string) (*inventoryv1.GetStockResponse, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), short)
		defer cancel()
		start := time.Now()
		resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: sku})
		return resp, time.Since(start), err
	}

	begin := time.Now()
	for _, c := range []*inventoryv1.InventoryServiceResilientClient{cached, uncached} {
		if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatalf("apple takes the bucket's token: %v", err)
		}
	}
	clk.Advance(2 * time.Hour) // the cached apple is stale, no longer fresh

	_, took, err := get(uncached, "pear")
	var re *runtime.Error
	switch {
	case !errors.Is(err, runtime.ErrRateLimited) || status.Code(err) != codes.ResourceExhausted || !errors.As(err, &re):
		t.Errorf("uncached pear, %v to its deadline, its token ~200 ms away: %v, want RESOURCE_EXHAUSTED matching ErrRateLimited", short, err)
	case took > slack:
		t.Errorf("uncached pear was refused after %v, want at once", took)
	case re.RetryAfter <= short-took:
		t.Errorf("uncached pear's refusal says a token in %v, before its deadline %v away", re.RetryAfter, short-took)
	}

	_, took, err = get(cached, "pear")
	if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrRateLimited) {
		t.Errorf("cached pear, %v to its deadline: %v, want DEADLINE_EXCEEDED (its shared call waits for the token under the method's limit)", short, err)
	}
	if took < short-5*time.Millisecond || took > short+slack {
		t.Errorf("cached pear ended after %v, want at its deadline (%v)", took, short)
	}

	resp, took, err := get(cached, "apple")
	if err != nil || resp.GetSku() != "apple" {
		t.Errorf("cached stale apple, %v to its deadline, the token still away: %v, %v; want the stale answer", short, resp, err)
	}
	if took < short-5*time.Millisecond || took > short+slack {
		t.Errorf("the stale apple came after %v, want at the caller's deadline (%v): the shared call waited for its token", took, short)
	}

	time.Sleep(time.Until(begin.Add(250 * time.Millisecond)))
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Errorf("at %v the server saw %d GetStock calls, want 2 (each client's apple): a shared call whose callers "+
			"all left went on to take the token due at 200 ms", time.Since(begin).Round(time.Millisecond), n)
	}
}
