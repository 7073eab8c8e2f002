package runtime_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack20bCachedRetrying is the generated inventory client whose GetStock
// keeps its cache and retries UNAVAILABLE (2 attempts, 5-20ms backoff),
// without breaker, bulkhead or rate limit.
func attack20bCachedRetrying(t *testing.T, cc grpc.ClientConnInterface, opts ...runtime.Option) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	opts = append(opts, runtime.WithPolicy(func(p *policy.Service) {
		p.Breaker, p.RateLimit, p.Bulkhead = nil, nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.RateLimit, m.Bulkhead, m.Breaker = nil, nil, nil
		m.Retry = retryPolicy(2)
		m.Timeout = 2 * time.Second
		m.Cache = &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: m.Cache.KeyFields}
	}))
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAttack20bSharedCallNeverReadsTheLeadersRequestAfterItLeft: the
// shared call of a cached key outlives the caller who started it, and that
// caller, once its GetStock returned (Canceled), owns its request again: it
// may reuse it for another sku, as pooled requests are. The shared call's
// retry must still ask for the key it is cached under, "apple": the other
// caller of "apple" must get apple's answer, and the cache must not keep
// banana's answer under apple's key.
func TestAttack20bSharedCallNeverReadsTheLeadersRequestAfterItLeft(t *testing.T) {
	atkNoLeak(t)
	var n atomic.Int32
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		if c.Method == atkGetStock && n.Add(1) == 1 {
			// The first attempt fails late, after the leader left.
			if err := server.Wait(ctx, 300*time.Millisecond); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "injected first attempt")
		}
		return nil
	})
	c := attack20bCachedRetrying(t, cc)

	leaderReq := &inventoryv1.GetStockRequest{Sku: "apple"}
	lctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaderDone := make(chan error, 1)
	go func() {
		_, err := c.GetStock(lctx, leaderReq)
		leaderDone <- err
	}()
	atkWaitFor(t, "the first attempt reaches the server", func() bool { return srv.Calls(atkGetStock) == 1 })

	type result struct {
		resp *inventoryv1.GetStockResponse
		err  error
	}
	other := make(chan result, 1)
	go func() {
		resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		other <- result{resp, err}
	}()
	time.Sleep(50 * time.Millisecond) // the other caller joins the shared call

	cancel()
	if err := <-leaderDone; status.Code(err) != codes.Canceled {
		t.Fatalf("leader: %v, want Canceled", err)
	}
	leaderReq.Sku = "banana" // the leader's request is its own again

	r := <-other
	if r.err != nil {
		t.Fatalf("other caller of apple: %v", r.err)
	}
	if r.resp.GetSku() != "apple" {
		t.Errorf("other caller of apple got the answer for sku %q: the shared call read the leader's request after the leader left", r.resp.GetSku())
	}
	// The cache keeps, under apple's key, apple's answer.
	resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	if err != nil || resp.GetSku() != "apple" {
		t.Errorf("apple from the cache: %v, %v, want sku apple", resp, err)
	}
	if got := srv.Calls(atkGetStock); got != 2 {
		t.Errorf("server saw %d GetStock calls, want 2 (the failed attempt and its retry)", got)
	}
}

// TestAttack20bFreshHitOfAnotherKeyDoesNotRestartTheStaleEpisode: the
// dependency is down; key "pear" is answered stale, call after call, while
// key "apple" is still fresh and answered from the cache. A fallback event
// is reported once per episode, "when a method is first answered by it for
// a cause since the method last succeeded": a fresh hit is the cache's
// answer, not the dependency's, so it ends no episode. Five stale answers
// between five hits are one event, not five (the WARN line of the logs,
// once per call, is what the README promises it never is).
func TestAttack20bFreshHitOfAnotherKeyDoesNotRestartTheStaleEpisode(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	clock := newAtkClock()
	var mu sync.Mutex
	var fallbackEvents []string
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Second, StaleTTL: time.Minute, MaxEntries: 10},
		inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock),
			runtime.WithObserver(func(ev runtime.Event) {
				if ev.Kind == runtime.EventFallback {
					mu.Lock()
					fallbackEvents = append(fallbackEvents, ev.Cause)
					mu.Unlock()
				}
			})}})
	if _, err := r18bGet(c, "pear"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second) // pear's answer is stale now
	if _, err := r18bGet(c, "apple"); err != nil {
		t.Fatal(err)
	}
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	for i := range 5 {
		if resp, err := r18bGet(c, "apple"); err != nil || resp.GetSku() != "apple" {
			t.Fatalf("round %d: apple: %v, %v, want the fresh answer", i, resp, err)
		}
		if resp, err := r18bGet(c, "pear"); err != nil || resp.GetSku() != "pear" {
			t.Fatalf("round %d: pear: %v, %v, want the stale answer", i, resp, err)
		}
	}
	if got := srv.Calls(atkGetStock); got != 2+5 {
		t.Errorf("server saw %d calls, want 7 (two fills, five failed calls for pear)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fallbackEvents) != 1 {
		t.Errorf("fallback events %v over one episode of stale answers, want one (stale_cache)", fallbackEvents)
	}
}

// TestAttack20bAbandonedSharedCallTakesNoPermitFreedLater: the shared call
// of GetStock waits for the service's one bulkhead permit, held by a
// StockReport; its only caller gives up. When the permit frees, the
// abandoned call must not take it nor send anything: the server sees no
// GetStock, and the bulkhead is free again.
func TestAttack20bAbandonedSharedCallTakesNoPermitFreedLater(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	hold := atkHold(release)
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		if c.Method == atkStockReport {
			return hold(ctx, c)
		}
		return nil
	})
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
		runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker, p.RateLimit = nil, nil
			p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: 5 * time.Second}
			for i := range p.Methods {
				p.Methods[i].Retry, p.Methods[i].RateLimit, p.Methods[i].Bulkhead = nil, nil, nil
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	reportDone := make(chan error, 1)
	go func() {
		_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "w"})
		reportDone <- err
	}()
	atkWaitFor(t, "StockReport holds the permit", func() bool { return srv.InFlight() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("GetStock waiting for the permit past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	close(release)
	if err := <-reportDone; err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // an abandoned call that took the freed permit would have sent by now
	if n := srv.Calls(atkGetStock); n != 0 {
		t.Errorf("server saw %d GetStock calls from a shared call nobody waits for", n)
	}
	if n, _ := c.Runtime().BulkheadInUse(atkGetStock); n != 0 {
		t.Errorf("%d permits in use after every call ended", n)
	}
}
