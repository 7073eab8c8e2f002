package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
)

// TestAttackR18BZeroValueClient: a generated client declared and never
// built (a struct field left zero, a missing constructor call) answers
// every call with FAILED_PRECONDITION, nothing sent, and its Runtime()
// can be inspected without a panic: a health page that prints the breaker
// state of a client that was never wired must not take the process down.
func TestAttackR18BZeroValueClient(t *testing.T) {
	var c inventoryv1.InventoryServiceResilientClient
	ctx := context.Background()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("GetStock: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("ReserveStock: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("WatchStock: %v, want FAILED_PRECONDITION", err)
	}
	rt := c.Runtime()
	for what, f := range map[string]func(){
		"BreakerState": func() {
			if _, ok := rt.BreakerState(atkGetStock); ok {
				t.Error("BreakerState of a client never built says it has a breaker")
			}
		},
		"BulkheadInUse": func() {
			if _, ok := rt.BulkheadInUse(atkGetStock); ok {
				t.Error("BulkheadInUse of a client never built says it has a bulkhead")
			}
		},
		"Policy": func() {
			if p := rt.Policy(); p != nil {
				t.Errorf("Policy of a client never built: %v, want nil", p)
			}
		},
		"Changes":  func() { _ = rt.Changes() },
		"Describe": func() { _ = rt.Describe() },
	} {
		if p := r18Panicked(f); p != nil {
			t.Errorf("Runtime().%s panicked: %v", what, p)
		}
	}
}

// TestAttackR18BNilClockOrRegistererIsRefused: WithClock and
// WithRegisterer given nil, or a typed nil (a *prometheus.Registry never
// made, a clock pointer never set), are refused by the constructor with
// an error naming the option, as WithObserver(nil) and WithPolicy(nil)
// are: never a panic deep inside client_golang, never the system clock
// or no metrics in silence where the caller asked for its own.
func TestAttackR18BNilClockOrRegistererIsRefused(t *testing.T) {
	var noRegistry *prometheus.Registry
	var noClock *fakeClock
	for name, opt := range map[string]runtime.Option{
		"WithClock(nil)":            runtime.WithClock(nil),
		"WithClock(typed nil)":      runtime.WithClock(noClock),
		"WithRegisterer(nil)":       runtime.WithRegisterer(nil),
		"WithRegisterer(typed nil)": runtime.WithRegisterer(noRegistry),
		"WithLogger(nil)":           runtime.WithLogger(nil),
	} {
		var err error
		if p := r18Panicked(func() {
			_, err = inventoryv1.NewInventoryServiceResilientClient(&grpc.ClientConn{}, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{opt}})
		}); p != nil {
			t.Errorf("%s: the constructor panicked: %v", name, p)
			continue
		}
		want := strings.SplitN(name, "(", 2)[0] + "(nil)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, want)
		}
	}
}
