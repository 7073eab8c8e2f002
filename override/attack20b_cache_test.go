package override_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack20bClock is a clock the test moves by hand.
type attack20bClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *attack20bClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *attack20bClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestAttack20bCacheOverridesAreWhatRuns: a file sets GetStock's
// fresh_ttl and stale_ttl, a variable its max_entries; the client then
// keeps answers as long, and as many, as they say (counted by the server,
// on a clock the test moves), and Changes names each value's source.
func TestAttack20bCacheOverridesAreWhatRuns(t *testing.T) {
	file := []byte(`services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock:
        cache: {fresh_ttl: 10s, stale_ttl: 20s}
`)
	env := []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__CACHE__MAX_ENTRIES=1"}
	set, err := override.Parse("overrides.yaml", file, env, inventory)
	if err != nil {
		t.Fatal(err)
	}
	srv, cc := attack20bServe(t)
	clock := &attack20bClock{now: time.Unix(3_000_000, 0)}
	opts := append(set.Options(inventory), runtime.WithClock(clock), runtime.WithPolicy(func(p *policy.Service) {
		p.Breaker, p.RateLimit, p.Bulkhead = nil, nil, nil
		for i := range p.Methods {
			if p.Methods[i].Name == inventoryv1.InventoryService_GetStock_FullMethodName {
				p.Methods[i].Retry = nil
			}
		}
	}))
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts})
	if err != nil {
		t.Fatal(err)
	}
	calls := func() int { return srv.Calls(inventoryv1.InventoryService_GetStock_FullMethodName) }
	get := func(sku string) (*inventoryv1.GetStockResponse, error) {
		return c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: sku})
	}
	if _, err := get("apple"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Second) // fresh for 10s, not the annotated 1s
	if _, err := get("apple"); err != nil || calls() != 1 {
		t.Fatalf("9s later: %v, server saw %d calls, want the fresh answer (fresh_ttl 10s)", err, calls())
	}
	clock.Advance(2 * time.Second) // 11s: stale, and the dependency is down
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	if resp, err := get("apple"); err != nil || resp.GetUnits() != 42 {
		t.Fatalf("11s later, dependency down: %v, %v, want the stale answer", resp, err)
	}
	clock.Advance(10 * time.Second) // 21s: past stale_ttl 20s, not the annotated 5m
	if _, err := get("apple"); err == nil {
		t.Fatal("21s later, dependency down: an answer, want the failure (stale_ttl 20s)")
	}
	// max_entries 1: a second key evicts the first.
	srv.SetBehaviour(server.Healthy)
	get("apple")
	get("pear")
	before := calls()
	get("apple")
	if calls() != before+1 {
		t.Errorf("apple after pear with max_entries 1: server saw %d calls, want %d (apple evicted)", calls(), before+1)
	}
	want := map[string]string{
		"methods.GetStock.cache.fresh_ttl":   `overrides.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.cache.fresh_ttl`,
		"methods.GetStock.cache.stale_ttl":   `overrides.yaml: services."example.inventory.v1.InventoryService".methods.GetStock.cache.stale_ttl`,
		"methods.GetStock.cache.max_entries": env[0][:strings.IndexByte(env[0], '=')],
	}
	for _, ch := range c.Runtime().Changes() {
		if w, ok := want[ch.Key]; ok {
			if ch.Source != w {
				t.Errorf("%s from %q, want %q", ch.Key, ch.Source, w)
			}
			delete(want, ch.Key)
		}
	}
	for k := range want {
		t.Errorf("Changes lists no %s", k)
	}
}

// attack20bServe serves the example services healthy on loopback and
// dials them.
func attack20bServe(t *testing.T) (*faultserver.Server, *grpc.ClientConn) {
	t.Helper()
	fs, err := faultserver.Start(server.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	cc, err := grpc.NewClient("passthrough:///"+fs.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	r18tReady(t, cc)
	return fs, cc
}
