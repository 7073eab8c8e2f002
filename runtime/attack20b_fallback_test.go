package runtime_test

import (
	"context"
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

// TestAttack20bFallbackOnlyWhereItApplies drives ReserveStock, with a
// fallback, through every case the README names: the server's refusal
// (INVALID_ARGUMENT), a nil request, an idempotency key that cannot travel,
// a caller who cancels, a caller whose deadline passes, and the server
// down. Only the last two reach the fallback, and only they are counted in
// resilient_client_fallbacks_total; the server sees what each sent.
func TestAttack20bFallbackOnlyWhereItApplies(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Fail(codes.InvalidArgument))
	reg := prometheus.NewRegistry()
	var called atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
		ReserveStockFallback: func(_ context.Context, req *inventoryv1.ReserveStockRequest, err error) (*inventoryv1.ReserveStockResponse, error) {
			called.Add(1)
			return &inventoryv1.ReserveStockResponse{ReservationId: "fallback"}, nil
		},
	}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		m := atkMethod(p, atkReserveStock)
		m.Retry = nil
		m.Timeout = 5 * time.Second
	})
	reserve := func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		return c.ReserveStock(ctx, req)
	}
	bg := context.Background()
	order := func(id string) *inventoryv1.ReserveStockRequest {
		return &inventoryv1.ReserveStockRequest{OrderId: id, Sku: "apple", Units: 1}
	}

	if _, err := reserve(bg, order("o1")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("server's INVALID_ARGUMENT: %v, want it as it is", err)
	}
	if _, err := reserve(bg, nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("nil request: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := reserve(bg, order("o\n2")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("key that cannot travel: %v, want INVALID_ARGUMENT", err)
	}
	if n := srv.Calls(atkReserveStock); n != 1 {
		t.Errorf("server saw %d ReserveStock calls, want 1 (the nil request and the bad key send nothing)", n)
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("fallback called %d times for refusals", n)
	}

	srv.SetBehaviour(server.Hang)
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(30*time.Millisecond, cancel)
	if resp, err := reserve(ctx, order("o3")); status.Code(err) != codes.Canceled || resp != nil {
		t.Errorf("cancelled caller: %v, %v, want Canceled and no answer", resp, err)
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("fallback called for a caller who cancelled")
	}

	dctx, dcancel := context.WithTimeout(bg, 30*time.Millisecond)
	defer dcancel()
	if resp, err := reserve(dctx, order("o4")); err != nil || resp.GetReservationId() != "fallback" {
		t.Errorf("caller's deadline passed: %v, %v, want the fallback's answer", resp, err)
	}
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	if resp, err := reserve(bg, order("o5")); err != nil || resp.GetReservationId() != "fallback" {
		t.Errorf("dependency down: %v, %v, want the fallback's answer", resp, err)
	}
	if n := called.Load(); n != 2 {
		t.Errorf("fallback called %d times, want 2", n)
	}
	wantMetric(t, reg, 1, "resilient_client_fallbacks_total", "method", "ReserveStock", "cause", "deadline_exceeded")
	wantMetric(t, reg, 1, "resilient_client_fallbacks_total", "method", "ReserveStock", "cause", "unavailable")
}

var atkReserveStock = inventoryv1.InventoryService_ReserveStock_FullMethodName
