package runtime_test

// Attacks on the rate limit's promises (README, "Rate limit"): a call that
// finds no token and may not wait for one is refused at once, "its
// reservation given back", so that refusals cost the bucket nothing.

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

// TestAttack25cRefusedStormLeavesTheBucketWhole: 512 callers at once
// against a bucket of 5 (20 tokens/s) that may not wait. The bucket's 5
// (and a token or two refilled while the storm lasts) go out, the rest are
// refused at once. Every refusal gave its reservation back, so once the
// storm is over the bucket refills at its rate: after 260 ms of quiet
// (more than the 250 ms a bucket of 5 takes to fill at 20/s) five calls in
// a row all find a token.
//
// Before, each refused caller reserved a token and cancelled it after: a
// cancellation gives back only what no later reservation depends on
// (golang.org/x/time/rate), so a refused caller that cancelled while
// another refused caller's reservation stood gave nothing back, and the
// storm left the bucket tens of tokens in debt (with 640 callers under
// -race, 14 to 77 tokens: up to 4 s at 20/s during which every call was
// refused, though no call had been let through).
func TestAttack25cRefusedStormLeavesTheBucketWhole(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 20, Burst: 5}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
	})
	get := func() error {
		_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		return err
	}
	var refusals int32
	for round := range 3 {
		if round > 0 {
			time.Sleep(300 * time.Millisecond) // the bucket refills after the last round's calls
		}
		before := fs.Calls(atkGetStock)
		var refused, other atomic.Int32
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for range 512 {
			wg.Go(func() {
				<-gate
				switch err := get(); {
				case err == nil:
				case errors.Is(err, runtime.ErrRateLimited) && status.Code(err) == codes.ResourceExhausted:
					refused.Add(1)
				default:
					other.Add(1)
				}
			})
		}
		begin := time.Now()
		close(gate)
		wg.Wait()
		took := time.Since(begin)
		if n := other.Load(); n != 0 {
			t.Fatalf("round %d: %d calls failed otherwise than by the rate limit", round, n)
		}
		sent := fs.Calls(atkGetStock) - before
		// 5 in the bucket, and at most 20/s × the storm's length more.
		if most := 5 + int(took.Seconds()*20) + 1; sent < 5 || sent > most {
			t.Fatalf("round %d: the server saw %d calls in a storm of %v, want 5 to %d", round, sent, took, most)
		}
		if int(refused.Load())+sent != 512 {
			t.Fatalf("round %d: %d refused + %d sent, want 512", round, refused.Load(), sent)
		}
		refusals += refused.Load()
		if got := metricValue(t, reg, "resilient_client_rate_limited_total", "method", "GetStock"); got != float64(refusals) {
			t.Errorf("round %d: rate_limited_total %v, want the %d refusals", round, got, refusals)
		}
		time.Sleep(260 * time.Millisecond) // the bucket refills: 5 tokens in 250 ms
		for i := range 5 {
			if err := get(); err != nil {
				t.Fatalf("round %d: call %d of 5 after 260 ms of quiet: %v (the storm's %d refusals left the bucket in debt)",
					round, i+1, err, refused.Load())
			}
		}
	}
}

// TestAttack25cWaitersAndRefusalsAdmitExactly: a bucket of 1 refilled
// every 500 ms, calls that may wait 700 ms. Of 10 callers at once, one
// takes the token, one waits for the next (about 500 ms), and the 8 whose
// token would come after about 1 s are refused at once, without waiting.
// Their reservations given back, the bucket is at the waiter's token when
// it goes: a caller arriving then waits for the one after it (500 ms,
// within 700 ms) and is let through; with a refusal's token still owed it
// would have had to wait about 1 s and been refused.
func TestAttack25cWaitersAndRefusalsAdmitExactly(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 2, Burst: 1, MaxWait: 700 * time.Millisecond}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 0, 0
	})
	get := func() (time.Duration, error) {
		begin := time.Now()
		_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		return time.Since(begin), err
	}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted, refused int
	var slowRefusal time.Duration
	for range 10 {
		wg.Go(func() {
			<-gate
			took, err := get()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case errors.Is(err, runtime.ErrRateLimited):
				refused++
				slowRefusal = max(slowRefusal, took)
			default:
				t.Errorf("a call failed otherwise than by the rate limit: %v", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if admitted != 2 || refused != 8 {
		t.Fatalf("of 10 callers, %d let through and %d refused, want 2 and 8", admitted, refused)
	}
	// Refused at once: a refusal that waited for its token would have
	// taken 700 ms or more.
	if slowRefusal >= 400*time.Millisecond {
		t.Errorf("the slowest refusal took %v, want at once", slowRefusal)
	}
	if took, err := get(); err != nil {
		t.Errorf("the caller after the waiter: %v after %v, want its token within the 700 ms max wait", err, took)
	}
	if n := fs.Calls(atkGetStock); n != 3 {
		t.Errorf("the server saw %d calls, want 3", n)
	}
}

// TestAttack25cAWaiterThatLeavesGivesItsTokenBack: a bucket of 1 refilled
// every 500 ms, calls that may wait 2 s. A takes the token; B waits for
// the next (at 500 ms) and C for the one after (1 s); B's caller cancels
// at 100 ms, and D comes at 120 ms. B's place is free again: C has the
// token at 500 ms, and D the one after, at 1 s. With golang.org/x/time/rate,
// whose cancellation restores only what no later reservation depends on,
// C kept its 1 s and D waited for the token after it, at 1.5 s: each
// waiter that left before those queued behind it cost the bucket a token.
func TestAttack25cAWaiterThatLeavesGivesItsTokenBack(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 2, Burst: 1, MaxWait: 2 * time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 0, 0
	})
	get := func(ctx context.Context) error {
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		return err
	}
	start := time.Now()
	if err := get(context.Background()); err != nil {
		t.Fatal(err)
	}
	bctx, cancelB := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = get(bctx) })
	time.Sleep(20 * time.Millisecond) // B queues before C
	var cErr error
	var cAt time.Duration
	wg.Go(func() { cErr = get(context.Background()); cAt = time.Since(start) })
	time.Sleep(80 * time.Millisecond)
	cancelB()
	time.Sleep(20 * time.Millisecond)
	err := get(context.Background())
	dAt := time.Since(start)
	wg.Wait()
	// In the order they came: C has B's token at 500 ms, D the next at
	// 1 s; with x/time/rate they had 1 s and 1.5 s.
	if cErr != nil || cAt > 800*time.Millisecond {
		t.Errorf("C: %v at %v from the start, want B's token, at about 500 ms", cErr, cAt)
	}
	if err != nil || dAt > 1250*time.Millisecond {
		t.Errorf("D: %v at %v from the start, want the token after C's, at about 1 s", err, dAt)
	}
}

// TestAttack25cSustainedStormAdmitsNoMoreThanTheRate: 128 callers call in
// a loop for 600 ms against a bucket of 5 refilled at 20/s that may not
// wait: the server sees at most the bucket and the refill of the time the
// storm lasted (5 + 20/s × its length, and one for the edge), however the
// callers are scheduled.
//
// Before, a call read the clock before it waited for the limiter's lock,
// and x/time/rate takes a time earlier than the last it saw as that
// earlier moment: a refused call's reservation moved the bucket's clock
// back, and the next call was given the refill of that time again. Under
// -race on an idle 2-core machine the server saw 48 to 158 calls where 18
// were allowed (4 runs in 5); with only the refusals serialized, a storm
// at load 25 still let 38 through where 9 were allowed.
func TestAttack25cSustainedStormAdmitsNoMoreThanTheRate(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: 20, Burst: 5}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
	})
	took := atkStorm(128, 600*time.Millisecond, func() {
		_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	})
	if sent, most := fs.Calls(atkGetStock), 5+int(took.Seconds()*20)+1; sent > most {
		t.Errorf("the server saw %d calls in %v, a bucket of 5 at 20/s allows %d", sent, took, most)
	}
}

// atkStorm has callers goroutines each run call in a loop, all started at
// once, for about d; it returns how long the storm lasted, from the start
// to the last call's end.
func atkStorm(callers int, d time.Duration, call func()) time.Duration {
	var wg sync.WaitGroup
	gate, stop := make(chan struct{}), make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-gate
			for {
				select {
				case <-stop:
					return
				default:
				}
				call()
			}
		})
	}
	begin := time.Now()
	close(gate)
	time.Sleep(d)
	close(stop)
	wg.Wait()
	return time.Since(begin)
}
