package runtime_test

// Attacks on the fallback and the stale answer (README, "Fallback":
// "It runs when the call failed on the dependency's side or was refused
// by the runtime"; "Cache": a stale answer stands in "when that call fails
// on the dependency's side or is refused by the runtime"). A call that
// fails on the client's own side (a request that does not marshal, a
// message past a size limit) is neither: it says nothing of the
// dependency, which the breaker and the adaptive layers already know
// (unsent), and the fallback or a stale answer would hide a defect of the
// caller behind a degraded answer, on every call, with nothing reaching
// the dependency.

import (
	"context"
	"strings"
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

// TestAttack22aFallbackDoesNotHideAClientSideFailure: GetStock with a
// fallback, called with a request that does not marshal (a sku that is
// not UTF-8) and with one past the caller's own send limit. Nothing
// reaches the server; the caller must get gRPC's INTERNAL and
// RESOURCE_EXHAUSTED, not the fallback's answer. Before, the fallback
// answered both (fallbackApplies looked at the code alone), so a caller
// whose requests could never be sent was answered "in stock" for ever.
func TestAttack22aFallbackDoesNotHideAClientSideFailure(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	var fell atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
			fell.Add(1)
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: 99}, nil
		},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name string
		req  *inventoryv1.GetStockRequest
		opts []grpc.CallOption
		code codes.Code
	}{
		{"a request that does not marshal", &inventoryv1.GetStockRequest{Sku: "\xff\xfe"}, nil, codes.Internal},
		{"a request past the caller's send limit", &inventoryv1.GetStockRequest{Sku: strings.Repeat("s", 200)},
			[]grpc.CallOption{grpc.MaxCallSendMsgSize(64)}, codes.ResourceExhausted},
	} {
		before := fell.Load()
		resp, err := c.GetStock(ctx, tc.req, tc.opts...)
		if fell.Load() != before {
			t.Errorf("%s: the fallback ran (answered %v), hiding a failure on the client's side", tc.name, resp)
		}
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v (%v), want %v from gRPC", tc.name, status.Code(err), err, tc.code)
		}
	}
	if n := srv.Calls(atkGetStock); n != 0 {
		t.Errorf("the server saw %d GetStock calls, want 0: nothing could be sent", n)
	}
	// A failure of the dependency is still the fallback's.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	before := fell.Load()
	if resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil || resp.GetUnits() != 99 {
		t.Errorf("against UNAVAILABLE: %v, %v; want the fallback's 99 units", resp, err)
	}
	if fell.Load() != before+1 {
		t.Errorf("the fallback ran %d times against UNAVAILABLE, want 1", fell.Load()-before)
	}
}

// TestAttack22aStaleAnswerDoesNotHideAClientSideFailure: GetStock cached
// per sku, its answer kept and past fresh_ttl, called with the caller's
// send limit below the request's size: the shared call fails on the
// client's side, and the caller must get RESOURCE_EXHAUSTED, not the
// stale answer (which it would be given on every call, the same call
// never sent). Before, the stale answer stood in for it.
func TestAttack22aStaleAnswerDoesNotHideAClientSideFailure(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	clock := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}}, func(p *policy.Service) {
		atkMethod(p, atkGetStock).Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Second, StaleTTL: time.Hour, MaxEntries: 10}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sku := strings.Repeat("s", 200)
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: sku}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	clock.Advance(2 * time.Second) // past fresh_ttl, within stale_ttl
	resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: sku}, grpc.MaxCallSendMsgSize(64))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a request past the caller's send limit got %v, %v; want RESOURCE_EXHAUSTED, not the stale answer", resp, err)
	}
	if n := srv.Calls(atkGetStock); n != 1 {
		t.Errorf("the server saw %d GetStock calls, want 1 (the first)", n)
	}
	// A failure of the dependency still gets the stale answer.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	if resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: sku}); err != nil || resp.GetSku() != sku {
		t.Errorf("against UNAVAILABLE: %v, %v; want the stale answer", resp, err)
	}
}
