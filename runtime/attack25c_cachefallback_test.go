package runtime_test

// Attacks on the fallback and the cache together (README, "Fallback",
// "Cache"): the callers who shared one failed call each get their own
// fallback, called once with their own request; what a fallback answered
// is never kept, so it is neither a fresh hit nor a stale answer later;
// a stale answer serves every waiter of a failed shared call, each
// counted, with one call to the server.

import (
	"bytes"
	"context"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk25cInCached counts the goroutines waiting in the cache (a shared
// call's starter and its joiners): a test that needs every caller joined
// before the shared call ends waits for it rather than sleeping.
func atk25cInCached() int {
	buf := make([]byte, 1<<20)
	for {
		n := goruntime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	// A frame of cached, not the "created by" line of the shared call's
	// goroutine, which it starts.
	return bytes.Count(buf, []byte("\ngithub.com/go-resilient/resilient/runtime.cached["))
}

// atk25cCachedInventory builds the inventory client with GetStock's cache
// (fresh 1 s, stale 5 min as annotated), no rate limit, breaker or
// retry, a 10 s attempt timeout, on clock, with fallback as GetStock's fallback.
func atk25cCachedInventory(t *testing.T, cc grpc.ClientConnInterface, clock runtime.Clock, reg prometheus.Registerer,
	fallback runtime.Fallback[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	opts := []runtime.Option{runtime.WithClock(clock), runtime.WithPolicy(func(p *policy.Service) {
		p.RateLimit, p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead = nil, nil, nil, nil, nil
		m := atkMethod(p, atkGetStock)
		m.Retry, m.RateLimit = nil, nil
		m.Timeout, m.OverallTimeout = 10*time.Second, 0 // the test releases the server
	})}
	if reg != nil {
		opts = append(opts, runtime.WithRegisterer(reg))
	}
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: opts, GetStockFallback: fallback})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAttack25cFallbackOfASharedCallIsEachCallersAndNeverKept: six callers
// of one key share a call the server fails. Each gets the fallback, called
// once for it, with its own request; the server saw one call. The
// fallback's answer is not kept: the next call goes to the server and gets
// its answer (42), which is then the fresh hit; once it is stale, a failure
// is answered by it (not by the fallback's -1), and the fallback is not
// called.
func TestAttack25cFallbackOfASharedCallIsEachCallersAndNeverKept(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return status.Error(codes.Unavailable, "down")
	})
	readyConn(t, cc)
	clock := newAtkClock()
	var mu sync.Mutex
	seen := map[*inventoryv1.GetStockRequest]int{}
	var calls atomic.Int32
	c := atk25cCachedInventory(t, cc, clock, nil, func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
		calls.Add(1)
		mu.Lock()
		seen[req]++
		mu.Unlock()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the fallback got %v, want the shared call's UNAVAILABLE", err)
		}
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	})
	const callers = 6
	reqs := make([]*inventoryv1.GetStockRequest, callers)
	resps := make([]*inventoryv1.GetStockResponse, callers)
	errs := make([]error, callers)
	base := atk25cInCached()
	var wg sync.WaitGroup
	for i := range callers {
		reqs[i] = &inventoryv1.GetStockRequest{Sku: "apple"}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resps[i], errs[i] = c.GetStock(ctx, reqs[i])
		})
	}
	atkWaitFor(t, "every caller waiting in the cache", func() bool { return atk25cInCached()-base == callers })
	atkWaitFor(t, "the shared call at the server", func() bool { return fs.Calls(atkGetStock) == 1 })
	close(release)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || resps[i].GetUnits() != -1 {
			t.Errorf("caller %d: %v %v, want the fallback's -1", i, resps[i], errs[i])
		}
		mu.Lock()
		n := seen[reqs[i]]
		mu.Unlock()
		if n != 1 {
			t.Errorf("caller %d: its fallback was called %d times with its own request, want 1", i, n)
		}
	}
	if n := calls.Load(); n != callers {
		t.Errorf("the fallback was called %d times for %d callers", n, callers)
	}
	if n := fs.Calls(atkGetStock); n != 1 {
		t.Errorf("the server saw %d calls, want the one shared call", n)
	}

	fs.SetBehaviour(server.Healthy)
	get := func() (*inventoryv1.GetStockResponse, error) {
		return c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	}
	if r, err := get(); err != nil || r.GetUnits() != 42 {
		t.Fatalf("after the fallbacks, with the server back: %v %v, want the server's 42 (was the fallback's answer kept?)", r, err)
	}
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Fatalf("the server saw %d calls, want 2: the fallback's answer was taken for a fresh one", n)
	}
	if r, err := get(); err != nil || r.GetUnits() != 42 || fs.Calls(atkGetStock) != 2 {
		t.Fatalf("fresh hit: %v %v after %d server calls, want 42 without a call", r, err, fs.Calls(atkGetStock))
	}
	clock.Advance(2 * time.Second) // past fresh_ttl (1 s), within stale_ttl (5 min)
	fs.SetBehaviour(func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "down again") })
	if r, err := get(); err != nil || r.GetUnits() != 42 {
		t.Fatalf("stale: %v %v, want the kept 42", r, err)
	}
	if n := calls.Load(); n != callers {
		t.Errorf("the fallback was called again (%d in all) where the stale answer stood in", n)
	}
	if n := fs.Calls(atkGetStock); n != 3 {
		t.Errorf("the server saw %d calls, want 3", n)
	}
}

// TestAttack25cStaleAnswerServesEveryWaiterOnce: eight callers wait for a
// shared call of a key whose answer is stale; the server fails it. Each
// gets the stale answer, a copy of its own, no fallback runs, the server
// saw one call, and each caller is one stale lookup and one stale_cache
// fallback in the metrics.
func TestAttack25cStaleAnswerServesEveryWaiterOnce(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	clock := newAtkClock()
	reg := prometheus.NewRegistry()
	var fallbacks atomic.Int32
	c := atk25cCachedInventory(t, cc, clock, reg, func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
		fallbacks.Add(1)
		return &inventoryv1.GetStockResponse{Units: -1}, nil
	})
	if r, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "pear"}); err != nil || r.GetUnits() != 42 {
		t.Fatalf("first call: %v %v", r, err)
	}
	clock.Advance(10 * time.Second)
	fs.SetBehaviour(func(ctx context.Context, _ server.Call) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return status.Error(codes.Unavailable, "down")
	})
	const callers = 8
	resps := atk25cShareOneCall(t, c, "pear", callers, release)
	resps[0].Units = 7 // a caller's copy is its own
	if n := fallbacks.Load(); n != 0 {
		t.Errorf("the fallback ran %d times where a stale answer stood in", n)
	}
	if n := fs.Calls(atkGetStock); n != 2 {
		t.Errorf("the server saw %d calls, want 2 (the first, and one shared)", n)
	}
	wantMetric(t, reg, callers, "resilient_client_fallbacks_total", "cause", "stale_cache")
	wantMetric(t, reg, callers, "resilient_client_cache_lookups_total", "result", "stale")
	if r, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "pear"}); err != nil || r.GetUnits() != 42 {
		t.Errorf("the next stale answer: %v %v, want 42 (a caller's change reached the kept answer)", r, err)
	}
}

// TestAttack25cJoinersOfASharedSuccessEachGetACopy: eight callers share
// one call that succeeds. Each gets a message of its own (none the same
// as another's), one call reached the server, and a caller changing its
// answer changes neither the next fresh hit nor another caller's.
func TestAttack25cJoinersOfASharedSuccessEachGetACopy(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, atkHold(release))
	readyConn(t, cc)
	c := atk25cCachedInventory(t, cc, newAtkClock(), nil, nil)
	const callers = 8
	resps := atk25cShareOneCall(t, c, "plum", callers, release)
	if n := fs.Calls(atkGetStock); n != 1 {
		t.Errorf("the server saw %d calls for %d callers, want 1", n, callers)
	}
	for i := range callers {
		resps[i].Units = int64(-i)
	}
	r, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "plum"})
	if err != nil || r.GetUnits() != 42 || fs.Calls(atkGetStock) != 1 {
		t.Errorf("fresh hit after the callers changed theirs: %v %v (%d server calls), want 42 without a call", r, err, fs.Calls(atkGetStock))
	}
}

// atk25cShareOneCall has n callers of sku wait in c's cache for one shared
// call, lets it end by closing release, and fails unless each caller got
// 42 in a message of its own (none the same as another's); it returns
// their answers.
func atk25cShareOneCall(t *testing.T, c *inventoryv1.InventoryServiceResilientClient, sku string, n int, release chan struct{}) []*inventoryv1.GetStockResponse {
	t.Helper()
	resps := make([]*inventoryv1.GetStockResponse, n)
	errs := make([]error, n)
	base := atk25cInCached()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resps[i], errs[i] = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: sku})
		})
	}
	atkWaitFor(t, "every caller waiting in the cache", func() bool { return atk25cInCached()-base == n })
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || resps[i].GetUnits() != 42 {
			t.Fatalf("caller %d: %v %v, want 42", i, resps[i], errs[i])
		}
		for j := range i {
			if resps[i] == resps[j] {
				t.Errorf("callers %d and %d got the same message, not a copy each", i, j)
			}
		}
	}
	return resps
}
