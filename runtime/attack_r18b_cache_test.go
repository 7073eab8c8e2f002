package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18bCached builds the generated inventory client whose GetStock keeps
// its cache (as c says), without breaker, rate limit or retries, so that
// what the server sees is the cache's doing.
func r18bCached(t *testing.T, cc grpc.ClientConnInterface, c policy.Cache, o inventoryv1.InventoryServiceResilientOptions) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	o.Runtime = append(o.Runtime, runtime.WithPolicy(func(p *policy.Service) {
		p.Breaker, p.RateLimit, p.Bulkhead = nil, nil, nil
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		c.KeyFields = m.Cache.KeyFields
		m.Cache = &c
	}))
	cl, err := inventoryv1.NewInventoryServiceResilientClient(cc, o)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func r18bGet(c *inventoryv1.InventoryServiceResilientClient, sku string) (*inventoryv1.GetStockResponse, error) {
	return c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: sku})
}

// TestAttackR18BCacheTTLEdgesAndOneLookupPerCall drives fresh_ttl and
// stale_ttl to the nanosecond with a fake clock: an answer is fresh while
// younger than fresh_ttl (not at it), stale while younger than stale_ttl
// (not at it). And resilient_client_cache_lookups_total counts each call
// once, under one result, so that hit / (hit + miss + stale) is the hit
// ratio the README says it is.
func TestAttackR18BCacheTTLEdgesAndOneLookupPerCall(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	clock := newAtkClock()
	reg := prometheus.NewRegistry()
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Second, StaleTTL: 3 * time.Second, MaxEntries: 10},
		inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock), runtime.WithRegisterer(reg)}})
	calls := 0
	get := func() (*inventoryv1.GetStockResponse, error) {
		calls++
		return r18bGet(c, "apple")
	}
	if _, err := get(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second - 1)
	if _, err := get(); err != nil || srv.Calls(atkGetStock) != 1 {
		t.Fatalf("1ns before fresh_ttl: %v, server saw %d calls, want the fresh answer", err, srv.Calls(atkGetStock))
	}
	clock.Advance(1)
	if _, err := get(); err != nil || srv.Calls(atkGetStock) != 2 {
		t.Fatalf("at fresh_ttl: %v, server saw %d calls, want a new call", err, srv.Calls(atkGetStock))
	}
	// The answer is now from this moment; the dependency goes down.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	clock.Advance(3*time.Second - 1)
	if resp, err := get(); err != nil || resp.GetUnits() != 42 {
		t.Fatalf("1ns before stale_ttl: %v %v, want the stale 42", resp, err)
	}
	clock.Advance(1)
	if _, err := get(); status.Code(err) != codes.Unavailable {
		t.Fatalf("at stale_ttl: %v, want the dependency's UNAVAILABLE, the answer too old", err)
	}
	if got := srv.Calls(atkGetStock); got != 4 {
		t.Errorf("server saw %d calls, want 4", got)
	}
	looked := r18bSeries(t, reg, "resilient_client_cache_lookups_total", "GetStock", "result")
	want := map[string]float64{"hit": 1, "miss": 3, "stale": 1}
	for r, n := range want {
		if looked[r] != n {
			t.Errorf("cache lookups %v, want %v: each of the %d calls once, under its result", looked, want, calls)
			break
		}
	}
}

// TestAttackR18BStaleHidesFailuresNeverAnswers: with a stale answer kept,
// every code the dependency answers with (the request was understood and
// refused: repeating it changes nothing) reaches the caller as it is, and
// only a failure is hidden by the stale answer.
func TestAttackR18BStaleHidesFailuresNeverAnswers(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	clock := newAtkClock()
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Second, StaleTTL: time.Hour, MaxEntries: 10},
		inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}})
	if _, err := r18bGet(c, "apple"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	answers := []codes.Code{codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated, codes.Aborted}
	for _, code := range answers {
		srv.SetBehaviour(server.Fail(code))
		if resp, err := r18bGet(c, "apple"); status.Code(err) != code {
			t.Errorf("the dependency answered %v: the caller got %v %v, want the answer, not the stale value", code, resp, err)
		}
	}
	failures := []codes.Code{codes.Unavailable, codes.Unknown, codes.Internal, codes.ResourceExhausted, codes.DataLoss, codes.DeadlineExceeded}
	for _, code := range failures {
		srv.SetBehaviour(server.Fail(code))
		if resp, err := r18bGet(c, "apple"); err != nil || resp.GetUnits() != 42 {
			t.Errorf("the dependency failed with %v: the caller got %v %v, want the stale 42", code, resp, err)
		}
	}
}

// TestAttackR18BEvictionUnderConcurrentCallers: 16 callers over 12 keys
// against max_entries 3, then one pass over the keys: a key can answer
// without a call only if it was kept, so at most 3 do, whatever order the
// concurrent callers came in.
func TestAttackR18BEvictionUnderConcurrentCallers(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	clock := newAtkClock() // never advanced: every kept answer stays fresh
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 3},
		inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}})
	const keys = 12
	var wg sync.WaitGroup
	var failed atomic.Int32
	for g := range 16 {
		wg.Go(func() {
			for i := range 30 {
				if _, err := r18bGet(c, fmt.Sprint("sku-", (g*7+i)%keys)); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed against a healthy server", failed.Load())
	}
	before := srv.Calls(atkGetStock)
	for k := range keys {
		if _, err := r18bGet(c, fmt.Sprint("sku-", k)); err != nil {
			t.Fatal(err)
		}
	}
	if hits := keys - (srv.Calls(atkGetStock) - before); hits > 3 {
		t.Errorf("%d of %d keys answered from the cache after the burst, want at most max_entries 3", hits, keys)
	}
}

// TestAttackR18BCachedCallLeavesTheCallersHeaderAlone: the shared call
// runs for every caller of the key and may outlive the one that started
// it, so it writes into no caller's memory: a caller's grpc.Header,
// grpc.Trailer and grpc.Peer are left as they were, on a miss as on a hit
// (README, Cache), and the call is answered all the same.
func TestAttackR18BCachedCallLeavesTheCallersHeaderAlone(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}, inventoryv1.InventoryServiceResilientOptions{})
	for i := range 2 {
		var header, trailer metadata.MD
		var p peer.Peer
		resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"},
			grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
		if err != nil || resp.GetUnits() != 42 {
			t.Fatalf("call %d: %v %v", i, resp, err)
		}
		if header != nil || trailer != nil || p.Addr != nil {
			t.Errorf("call %d: header %v, trailer %v, peer %v written, want them left as they were", i, header, trailer, p.Addr)
		}
	}
	if got := srv.Calls(atkGetStock); got != 1 {
		t.Errorf("server saw %d calls, want 1", got)
	}
}

// TestAttackR18BFreshAnswerTakesNoTokenNorPermit: a fresh answer comes
// before every other layer: a hundred hits take no rate-limit token (a
// bucket of 2 that refills once a minute still serves another key) and
// no bulkhead permit.
func TestAttackR18BFreshAnswerTakesNoTokenNorPermit(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker = nil
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 1.0 / 60, Burst: 2}
			p.Bulkhead = &policy.Bulkhead{Permits: 1}
			m := atkMethod(p, atkGetStock)
			m.Retry = nil
			m.Cache.FreshTTL, m.Cache.StaleTTL = time.Hour, time.Hour
		})}})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := r18bGet(c, "apple"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r18bGet(c, "pear"); err != nil {
		t.Errorf("another key after 99 fresh hits: %v, want the bucket's second token", err)
	}
	if _, err := r18bGet(c, "plum"); !errors.Is(err, runtime.ErrRateLimited) {
		t.Errorf("a third key: %v, want ErrRateLimited: the bucket held 2", err)
	}
	if got := srv.Calls(atkGetStock); got != 2 {
		t.Errorf("server saw %d calls, want 2", got)
	}
	atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after fresh hits")
}
