package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func skuKey(r *inventoryv1.GetStockRequest) string { return r.GetSku() }

func cachedGetStock(ctx context.Context, rt *runtime.Client, cc grpc.ClientConnInterface, sku string) (*inventoryv1.GetStockResponse, error) {
	plain := inventoryv1.NewInventoryServiceClient(cc)
	return runtime.UnaryCached(ctx, rt.Method(0), "", skuKey, &inventoryv1.GetStockRequest{Sku: sku}, nil, plain.GetStock, nil)
}

func cachedInventory(t *testing.T, c *policy.Cache, breaker *policy.Breaker, opts ...runtime.Option) *runtime.Client {
	return inventory(t, policy.Service{Breaker: breaker, Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: time.Second, Cache: c},
	}}, opts...)
}

// TestCacheFreshAnswersWithoutCalling: within fresh_ttl the dependency is
// not called; after it, it is; each caller gets its own copy.
func TestCacheFreshAnswersWithoutCalling(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	clock := newFakeClock()
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 10}, nil, runtime.WithClock(clock))
	first, err := cachedGetStock(context.Background(), rt, cc, "apple")
	if err != nil {
		t.Fatal(err)
	}
	first.Units = -7 // a caller changing its answer changes no one else's
	for range 5 {
		resp, err := cachedGetStock(context.Background(), rt, cc, "apple")
		if err != nil || resp.GetUnits() != 42 {
			t.Fatalf("%v %v, want the cached 42", resp, err)
		}
	}
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d calls, want 1: the rest were fresh", got)
	}
	if _, err := cachedGetStock(context.Background(), rt, cc, "pear"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := cachedGetStock(context.Background(), rt, cc, "apple"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Calls(getStock); got != 3 {
		t.Errorf("server saw %d calls, want 3: another key, then apple once no longer fresh", got)
	}
}

// TestCacheSingleFlight: concurrent callers of one key share one call.
func TestCacheSingleFlight(t *testing.T) {
	srv, cc := start(t, server.Slow(100*time.Millisecond))
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			resp, err := cachedGetStock(context.Background(), rt, cc, "apple")
			if err == nil && resp.GetUnits() != 42 {
				err = errors.New("wrong answer")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d calls for 20 concurrent callers, want 1", got)
	}
}

// TestCacheCallerGivingUpDoesNotFailTheOthers: the shared call runs with
// its own deadline; the first caller's short deadline ends only its wait.
// The second caller must join while the first is still there (300 ms of
// an 800 ms call: with 60 ms of 250, at load 14 the first had gone before
// the second joined, so the second made a call of its own).
func TestCacheCallerGivingUpDoesNotFailTheOthers(t *testing.T) {
	srv, cc := start(t, server.Slow(800*time.Millisecond))
	readyConn(t, cc)
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10}, nil)
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	firstErr := make(chan error, 1)
	go func() {
		_, err := cachedGetStock(short, rt, cc, "apple")
		firstErr <- err
	}()
	// The second caller joins the flight once its call is on the wire.
	for deadline := time.Now().Add(2 * time.Second); srv.Calls(getStock) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	resp, err := cachedGetStock(context.Background(), rt, cc, "apple")
	if err != nil || resp.GetUnits() != 42 {
		t.Fatalf("second caller: %v %v, want the shared answer", resp, err)
	}
	if err := <-firstErr; status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("first caller: %v, want its own DEADLINE_EXCEEDED", err)
	}
	if srv.Calls(getStock) != 1 || srv.Cancelled(getStock) != 0 {
		t.Errorf("server saw %d calls, %d cancelled; want 1 call that ran to its end", srv.Calls(getStock), srv.Cancelled(getStock))
	}
}

// TestCacheStaleOnError: once the value is no longer fresh, a transient
// failure is answered with it until stale_ttl, counted and reported as a
// stale_cache fallback; an answer such as NOT_FOUND is not hidden; a key
// with no value fails.
func TestCacheStaleOnError(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	var events []runtime.Event
	var mu sync.Mutex
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Minute, MaxEntries: 10}, nil,
		runtime.WithClock(clock), runtime.WithRegisterer(reg), runtime.WithObserver(func(e runtime.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
	if _, err := cachedGetStock(context.Background(), rt, cc, "apple"); err != nil {
		t.Fatal(err)
	}
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	clock.Advance(2 * time.Second)
	for range 3 {
		resp, err := cachedGetStock(context.Background(), rt, cc, "apple")
		if err != nil || resp.GetUnits() != 42 {
			t.Fatalf("%v %v, want the stale 42", resp, err)
		}
	}
	if _, err := cachedGetStock(context.Background(), rt, cc, "pear"); status.Code(err) != codes.Unavailable {
		t.Errorf("a key with no value: %v, want UNAVAILABLE", err)
	}
	srv.SetBehaviour(server.Fail(codes.NotFound))
	if _, err := cachedGetStock(context.Background(), rt, cc, "apple"); status.Code(err) != codes.NotFound {
		t.Errorf("an answer: %v, want NOT_FOUND, not a stale value", err)
	}
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	clock.Advance(time.Minute)
	if _, err := cachedGetStock(context.Background(), rt, cc, "apple"); status.Code(err) != codes.Unavailable {
		t.Errorf("past stale_ttl: %v, want UNAVAILABLE", err)
	}
	if got := fallbackCount(t, reg, "stale_cache"); got != 3 {
		t.Errorf("fallbacks_total{cause=stale_cache} = %v, want 3", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Kind != runtime.EventFallback || events[0].Cause != "stale_cache" {
		t.Errorf("events %+v, want one stale_cache fallback for the episode", events)
	}
}

// TestCacheStaleWhenTheBreakerIsOpen: an open breaker is answered from the
// cache too.
func TestCacheStaleWhenTheBreakerIsOpen(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	clock := newFakeClock()
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Hour, MaxEntries: 10},
		breakerPolicy(2, 1), runtime.WithClock(clock))
	if _, err := cachedGetStock(context.Background(), rt, cc, "apple"); err != nil {
		t.Fatal(err)
	}
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	for range 2 { // two failures of other keys open the breaker
		_, _ = cachedGetStock(context.Background(), rt, cc, "x"+time.Now().String())
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	clock.Advance(2 * time.Second)
	calls := srv.Calls(getStock)
	resp, err := cachedGetStock(context.Background(), rt, cc, "apple")
	if err != nil || resp.GetUnits() != 42 {
		t.Fatalf("%v %v, want the stale answer while the breaker is open", resp, err)
	}
	if srv.Calls(getStock) != calls {
		t.Error("a call passed the open breaker")
	}
}

// TestCacheEvictsTheLeastRecentlyUsed: memory is bounded by max_entries.
func TestCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 2}, nil)
	for _, sku := range []string{"a", "b", "a", "c", "a", "b"} {
		if _, err := cachedGetStock(context.Background(), rt, cc, sku); err != nil {
			t.Fatal(err)
		}
	}
	// a (call), b (call), a (hit), c (call, evicts b), a (hit), b (call).
	if got := srv.Calls(getStock); got != 4 {
		t.Errorf("server saw %d calls, want 4", got)
	}
}

func fallbackCount(t *testing.T, reg *prometheus.Registry, cause string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "resilient_client_fallbacks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == cause {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestCacheMetrics: every lookup of a cached method is counted as a hit
// (no call), a miss (a call made or joined) or a stale answer.
func TestCacheMetrics(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Minute, MaxEntries: 10}, nil,
		runtime.WithClock(clock), runtime.WithRegisterer(reg))
	for range 3 {
		if _, err := cachedGetStock(context.Background(), rt, cc, "apple"); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Second)
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	if resp, err := cachedGetStock(context.Background(), rt, cc, "apple"); err != nil || resp.GetUnits() != 42 {
		t.Fatalf("%v %v, want the stale 42", resp, err)
	}
	// Four calls, each counted once: the stale one is not also a miss
	// (TestAttackR18BCacheTTLEdgesAndOneLookupPerCall).
	want := map[string]float64{"hit": 2, "miss": 1, "stale": 1}
	for result, n := range want {
		if got := metricValue(t, reg, "resilient_client_cache_lookups_total", "method", "GetStock", "result", result); got != n {
			t.Errorf("cache_lookups_total{result=%q} = %v, want %v", result, got, n)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
