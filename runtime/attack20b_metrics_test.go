package runtime_test

import (
	"context"
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

const attack20bDep = "example.inventory.v1.InventoryService"

// TestAttack20bSecondClientLeavesTheBulkheadGaugeAlone: the README lets
// several clients of one dependency register on one registerer, sharing
// the series. A second client built while the first has calls in flight
// must not reset resilient_client_bulkhead_in_use: it reads the permits
// taken while those calls run, and 0, never a negative number, once they
// ended.
func TestAttack20bSecondClientLeavesTheBulkheadGaugeAlone(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	srv, cc := startFault(t, atkHold(release))
	reg := prometheus.NewRegistry()
	edit := func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = &policy.Bulkhead{Permits: 4}
		atkMethod(p, atkGetStock).Retry = nil
	}
	first := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, edit)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := first.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
				t.Errorf("held call: %v", err)
			}
		}()
	}
	atkWaitFor(t, "two calls in flight", func() bool { return srv.InFlight() == 2 })
	wantMetric(t, reg, 2, "resilient_client_bulkhead_in_use", "dependency", attack20bDep, "bulkhead", "shared")

	atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, edit)
	wantMetric(t, reg, 2, "resilient_client_bulkhead_in_use", "dependency", attack20bDep, "bulkhead", "shared")

	close(release)
	wg.Wait()
	wantMetric(t, reg, 0, "resilient_client_bulkhead_in_use", "dependency", attack20bDep, "bulkhead", "shared")
}

// TestAttack20bSecondClientLeavesAnOpenBreakerGaugeOpen: the breaker of the
// first client is open; building a second client of the same dependency
// on the same registerer must not report it closed
// (resilient_client_breaker_state is the state "as of the last
// transition", and ResilientBreakerOpen alerts on it).
func TestAttack20bSecondClientLeavesAnOpenBreakerGaugeOpen(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Fail(codes.Unavailable))
	reg := prometheus.NewRegistry()
	edit := func(p *policy.Service) {
		p.Bulkhead = nil
		p.Breaker = breakerPolicy(4, 1)
		atkMethod(p, atkGetStock).Retry = nil
	}
	first := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, edit)
	for range 4 {
		first.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	}
	if s, _ := first.Runtime().BreakerState(atkGetStock); s != runtime.StateOpen {
		t.Fatalf("first client's breaker %v after 4 failures (server saw %d), want open", s, srv.Calls(atkGetStock))
	}
	wantMetric(t, reg, 2, "resilient_client_breaker_state", "dependency", attack20bDep, "breaker", "shared")

	atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, edit)
	wantMetric(t, reg, 2, "resilient_client_breaker_state", "dependency", attack20bDep, "breaker", "shared")
	wantMetric(t, reg, 1, "resilient_client_breaker_transitions_total", "dependency", attack20bDep, "breaker", "shared", "state", "open")
}

// TestAttack20bSharedCallCountsOnceForItsCallers: ten callers of one key
// share one call, which fails once and is retried. The server sees two
// attempts, and the metrics count two attempts (one UNAVAILABLE, one OK)
// and one retry made, not ten of each, and ten misses.
func TestAttack20bSharedCallCountsOnceForItsCallers(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	hold := atkHold(release)
	var n atomic.Int32
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		if n.Add(1) == 1 {
			if err := hold(ctx, c); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "injected once")
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	c := attack20bCachedRetrying(t, cc, runtime.WithRegisterer(reg))
	var wg sync.WaitGroup
	var joined atomic.Int32
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			joined.Add(1)
			if resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil || resp.GetUnits() != 42 {
				t.Errorf("caller: %v, %v", resp, err)
			}
		}()
	}
	atkWaitFor(t, "the first attempt reaches the server", func() bool { return srv.Calls(atkGetStock) == 1 })
	atkWaitFor(t, "every caller started", func() bool { return joined.Load() == 10 })
	time.Sleep(20 * time.Millisecond) // they join the shared call
	close(release)
	wg.Wait()
	if got := srv.Calls(atkGetStock); got != 2 {
		t.Fatalf("server saw %d GetStock calls, want 2", got)
	}
	wantMetric(t, reg, 1, "resilient_client_attempts_total", "method", "GetStock", "code", "UNAVAILABLE")
	wantMetric(t, reg, 1, "resilient_client_attempts_total", "method", "GetStock", "code", "OK")
	wantMetric(t, reg, 1, "resilient_client_retries_total", "method", "GetStock", "outcome", "made")
	wantMetric(t, reg, 10, "resilient_client_cache_lookups_total", "method", "GetStock", "result", "miss")
	wantMetric(t, reg, 0, "resilient_client_cache_lookups_total", "method", "GetStock", "result", "hit")
}

// TestAttack20bAMethodNamedSharedHasItsOwnBreakerSeries: the breaker label
// is "shared" for the service's breaker and the method's name for a
// method's own. A method named "shared" (legal in a .proto, if against
// buf's style) with a breaker of its own then writes the same series as
// the service's: its breaker opening reads as the service's shared
// breaker open, the ResilientBreakerOpen alert names the wrong breaker,
// and the transitions of both are added up. Fixed: such a method is
// labelled by its full name.
func TestAttack20bAMethodNamedSharedHasItsOwnBreakerSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	const svc = "atk20b.Svc"
	breaker := func() *policy.Breaker {
		return &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: 10 * time.Second, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
	}
	rt, err := runtime.NewClient(&policy.Service{
		Name:    svc,
		Breaker: breaker(),
		Methods: []policy.Method{
			{Name: "/" + svc + "/shared", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second, Breaker: breaker()},
			{Name: "/" + svc + "/Other", Kind: policy.KindUnary, Idempotent: true, Timeout: time.Second},
		},
	}, runtime.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	h, err := runtime.NewUnary(rt, "/"+svc+"/shared", func(context.Context, *struct{}, ...grpc.CallOption) (*struct{}, error) {
		return nil, status.Error(codes.Unavailable, "down")
	}, runtime.UnaryHooks[struct{}, struct{}]{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		h.Call(context.Background(), &struct{}{})
	}
	if s, _ := rt.BreakerState("/" + svc + "/Other"); s != runtime.StateClosed {
		t.Fatalf("the service's shared breaker is %v, want closed", s)
	}
	if s, _ := rt.BreakerState("/" + svc + "/shared"); s != runtime.StateOpen {
		t.Fatalf("the method's own breaker is %v, want open", s)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "resilient_client_breaker_state" && len(mf.GetMetric()) != 2 {
			t.Errorf("%d breaker_state series for two breakers, want 2", len(mf.GetMetric()))
		}
	}
}
