package example_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The generated client binds each method to its policy by its full name:
// a policy edit that reorders the entries changes nothing, and one that
// drops, renames or duplicates an entry is refused when the client is
// built, naming the method. Never another method's policy, never a panic.

const (
	getStock     = inventoryv1.InventoryService_GetStock_FullMethodName
	reserveStock = inventoryv1.InventoryService_ReserveStock_FullMethodName
	watchStock   = inventoryv1.InventoryService_WatchStock_FullMethodName
	stockReport  = inventoryv1.InventoryService_StockReport_FullMethodName
)

// edited builds the generated inventory client on a server that answers
// every call UNAVAILABLE, with the given runtime options.
func edited(t *testing.T, opts ...runtime.Option) (*server.Server, *inventoryv1.InventoryServiceResilientClient, error) {
	t.Helper()
	srv, cc := dial(t, server.Fail(codes.Unavailable))
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: opts,
	})
	return srv, inv, err
}

// attempts calls each unary method once and returns how many attempts the
// server saw of each.
func attempts(t *testing.T, srv *server.Server, inv *inventoryv1.InventoryServiceResilientClient) map[string]int {
	t.Helper()
	ctx := context.Background()
	_, err := inv.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	checkUnavailable(t, "GetStock", err)
	_, err = inv.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "apple", Units: 1})
	checkUnavailable(t, "ReserveStock", err)
	_, err = inv.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"})
	checkUnavailable(t, "StockReport", err)
	return map[string]int{
		"GetStock":     srv.Calls(getStock),
		"ReserveStock": srv.Calls(reserveStock),
		"StockReport":  srv.Calls(stockReport),
	}
}

func checkUnavailable(t *testing.T, method string, err error) {
	t.Helper()
	if status.Code(err) != codes.Unavailable {
		t.Errorf("%s: %v, want UNAVAILABLE", method, err)
	}
}

// patient raises the annotated 300ms per-attempt timeout to 10s: the tests
// that count attempts against a server answering UNAVAILABLE at once are
// not about timeouts, and on a loaded machine (two cores, the race
// detector, other packages' tests beside) an attempt may take longer than
// 300ms to be answered, end DEADLINE_EXCEEDED, which is not retried, and
// change the count.
var patient = runtime.WithPolicy(func(p *policy.Service) {
	for i := range p.Methods {
		if p.Methods[i].Kind == policy.KindUnary && p.Methods[i].Timeout > 0 {
			p.Methods[i].Timeout = 10 * time.Second
		}
	}
})

// The annotations: GetStock and ReserveStock (with its order id) make 3
// attempts on UNAVAILABLE, StockReport (no retry) one.
var annotatedAttempts = map[string]int{"GetStock": 3, "ReserveStock": 3, "StockReport": 1}

func TestReorderedPolicyKeepsEachMethodsOwn(t *testing.T) {
	for name, edit := range map[string]func(p *policy.Service){
		"reversed": func(p *policy.Service) { slices.Reverse(p.Methods) },
		// The edit of the issue: GetStock and StockReport swapped, which
		// bound by position gave GetStock StockReport's single attempt.
		"GetStock and StockReport swapped": func(p *policy.Service) {
			p.Methods[0], p.Methods[3] = p.Methods[3], p.Methods[0]
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, inv, err := edited(t, runtime.WithPolicy(edit), patient)
			if err != nil {
				t.Fatalf("a reordered policy was refused: %v", err)
			}
			if got := attempts(t, srv, inv); !maps.Equal(got, annotatedAttempts) {
				t.Errorf("attempts seen by the server = %v, want %v", got, annotatedAttempts)
			}
			// ReserveStock still sends its own idempotency key.
			if keys := srv.Keys(reserveStock); len(keys) != 3 || keys[0] != "o-1" || keys[2] != "o-1" {
				t.Errorf("ReserveStock's idempotency keys = %q, want o-1 on each of 3 attempts", keys)
			}
		})
	}
}

// An edit may drop a method's key and cache: the handle then follows the
// policy in force, sending no key and calling every time.
func TestPolicyEditMayDropKeysAndCache(t *testing.T) {
	srv, cc := dial(t, server.Healthy)
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Methods[0].Cache = nil
			p.Methods[1].IdempotencyKey, p.Methods[1].Retry = "", nil
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := inv.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := inv.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "apple", Units: 1}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d GetStock calls for the same sku, want 2: the cache was removed", got)
	}
	if keys := srv.Keys(reserveStock); len(keys) != 0 {
		t.Errorf("ReserveStock sent keys %q, want none: the key was removed", keys)
	}
}

// An override of one method lands on that method, whatever the order the
// entries were left in by an earlier edit.
func TestOverrideAfterReorderLandsOnItsMethod(t *testing.T) {
	opts := overriddenAfter(t, `
services:
  example.inventory.v1.InventoryService:
    methods:
      GetStock:
        retry: {max_attempts: 2}
`, runtime.WithPolicy(func(p *policy.Service) { slices.Reverse(p.Methods) }))
	srv, inv, err := edited(t, opts...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"GetStock": 2, "ReserveStock": 3, "StockReport": 1}
	if got := attempts(t, srv, inv); !maps.Equal(got, want) {
		t.Errorf("attempts seen by the server = %v, want %v", got, want)
	}
}

func TestPolicyEditThatLosesAMethodIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *policy.Service)
		want []string // in the error
	}{{
		// Bound by position, this one panicked with index out of range.
		name: "last entry dropped",
		edit: func(p *policy.Service) { p.Methods = p.Methods[:3] },
		want: []string{stockReport, "removed or renamed"},
	}, {
		name: "first entry dropped",
		edit: func(p *policy.Service) { p.Methods = p.Methods[1:] },
		want: []string{getStock, "removed or renamed"},
	}, {
		name: "renamed",
		edit: func(p *policy.Service) { p.Methods[3].Name += "s" },
		want: []string{stockReport + ": its entry was removed or renamed", stockReport + "s: is not a method of the service"},
	}, {
		name: "duplicated",
		edit: func(p *policy.Service) { p.Methods = append(p.Methods, p.Methods[0]) },
		want: []string{getStock + ": has 2 entries"},
	}, {
		name: "one entry overwritten with a copy of another",
		edit: func(p *policy.Service) { p.Methods[0] = p.Methods[3] },
		want: []string{getStock + ": its entry was removed or renamed", stockReport + ": has 2 entries"},
	}, {
		name: "a stream's kind changed",
		edit: func(p *policy.Service) { p.Methods[2].Kind = policy.KindUnary },
		want: []string{watchStock + ": Kind changed from server-streaming to unary"},
	}, {
		name: "the idempotency key's field changed",
		edit: func(p *policy.Service) { p.Methods[1].IdempotencyKey = "sku" },
		want: []string{reserveStock + `: IdempotencyKey changed from "order_id" to "sku"`},
	}, {
		name: "a cache added where no key is generated",
		edit: func(p *policy.Service) {
			p.Methods[3].Cache = &policy.Cache{FreshTTL: 1e9, StaleTTL: 1e9, MaxEntries: 10, KeyFields: []string{"warehouse"}}
		},
		want: []string{stockReport + ": a Cache, but the generated client makes no cache key"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, inv, err := edited(t, runtime.WithPolicyFrom("the test's edit", tc.edit))
			if err == nil {
				t.Fatalf("the edit was accepted; GetStock then made %d attempts", attemptsOf(srv, inv))
			}
			if testing.Verbose() {
				t.Log(err)
			}
			if inv != nil {
				t.Error("a client was returned with the error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			if n := srv.Calls(getStock) + srv.Calls(stockReport); n != 0 {
				t.Errorf("the server saw %d calls", n)
			}
		})
	}
}

// The generated literal itself, changed before the client is built, is
// the truth of what the runtime applies: a client is still refused when a
// method the generated code binds has no entry.
func TestLiteralWithoutAMethodIsRefused(t *testing.T) {
	p := &inventoryv1.InventoryServiceResilientPolicy
	saved := p.Methods
	p.Methods = slices.Clone(p.Methods[:3])
	defer func() { p.Methods = saved }()
	_, _, err := edited(t)
	if err == nil || !strings.Contains(err.Error(), "no entry for method "+stockReport) {
		t.Fatalf("err = %v, want a refusal naming %s", err, stockReport)
	}
}

// overriddenAfter returns edits followed by the options of the overrides
// in file, loaded for the inventory client: the order in which a program
// passes its own edits and then the operator's.
func overriddenAfter(t *testing.T, file string, edits ...runtime.Option) []runtime.Option {
	t.Helper()
	p := &inventoryv1.InventoryServiceResilientPolicy
	set, err := override.Parse("overrides.yaml", []byte(file), nil, p)
	if err != nil {
		t.Fatal(err)
	}
	return append(edits, set.Options(p)...)
}

func attemptsOf(srv *server.Server, inv *inventoryv1.InventoryServiceResilientClient) int {
	if inv == nil {
		return 0
	}
	inv.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}) //nolint:errcheck
	return srv.Calls(getStock)
}
