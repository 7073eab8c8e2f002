package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// attack21cPanicking panics with "attack21c" while armed, before the
// invoker when before is set, else after it returned.
func attack21cPanicking(armed, before *atomic.Bool) grpc.DialOption {
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if armed.Load() && before.Load() {
			panic("attack21c")
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if armed.Load() {
			panic("attack21c")
		}
		return err
	})
}

// TestAttack21cPanicOnAMethodWithoutMetricsFreesEverything: the unary
// path no longer settles a closed breaker's ticket when the call panics on
// a method without metrics (panicHeld). StockReport (service breaker of 20
// calls at 0.5, 3 half-open probes; bulkhead of 8; no metrics) behind an
// interceptor that panics: every panic reaches its caller, no permit is
// kept, the closed breaker stays closed; then, with the breaker half-open,
// three probes that panic must give their places back, so that three
// healthy probes close it.
func TestAttack21cPanicOnAMethodWithoutMetricsFreesEverything(t *testing.T) {
	atkNoLeak(t)
	var armed, before atomic.Bool
	var failing atomic.Bool
	behave := func(ctx context.Context, _ server.Call) error {
		if failing.Load() {
			return status.Error(codes.Unavailable, "attack21c: down")
		}
		return nil
	}
	srv, cc := startFault(t, behave, attack21cPanicking(&armed, &before))
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}}, nil)
	rt := c.Runtime()
	ctx := context.Background()
	call := func() (p any, err error) {
		p = r18Panicked(func() { _, err = c.StockReport(ctx, &inventoryv1.StockReportRequest{}) })
		return p, err
	}
	// Connect first.
	if _, err := call(); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	for i := range 40 {
		before.Store(i%2 == 0)
		if p, err := call(); p != "attack21c" {
			t.Fatalf("closed breaker, call %d: panic %v, error %v; want the interceptor's panic", i, p, err)
		}
	}
	atkWantNoPermits(t, rt, atkStockReport, "kept by 40 panicking calls")
	atkWantBreaker(t, rt, atkStockReport, runtime.StateClosed, "after 40 panics the breaker is %v, want closed (a panic is the client's fault)")
	if got := srv.Calls(atkStockReport); got != 1+20 {
		t.Errorf("server saw %d calls, want 21 (the 20 panicking after the invoker were sent)", got)
	}

	// Open the breaker with failures of the server's.
	armed.Store(false)
	failing.Store(true)
	for range 20 {
		_, _ = call()
	}
	atkWantBreaker(t, rt, atkStockReport, runtime.StateOpen, "after 20 failures the breaker is %v, want open")
	failing.Store(false)
	clk.Advance(2*time.Second + time.Millisecond)
	armed.Store(true)
	for i := range 3 {
		before.Store(i == 1)
		if p, err := call(); p != "attack21c" {
			t.Fatalf("half-open probe %d: panic %v, error %v; want the interceptor's panic", i, p, err)
		}
	}
	atkWantNoPermits(t, rt, atkStockReport, "kept by the panicking probes")
	armed.Store(false)
	for i := range 3 {
		if _, err := call(); err != nil {
			t.Fatalf("healthy probe %d after 3 panicking ones: %v (a panicking probe kept its place)", i, err)
		}
	}
	atkWantBreaker(t, rt, atkStockReport, runtime.StateClosed, "after 3 healthy probes the breaker is %v, want closed")
}
