package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackR18BClosedConnectionIsNoAnswerOfTheDependency: a call made
// after the program closed its grpc.ClientConn fails with gRPC's
// CANCELLED "the client connection is closing", while the caller
// cancelled nothing. That is the client's own doing, not the dependency
// answering: a half-open probe ended so must not count as a success
// (closing the breaker towards a dependency that was failing a moment
// ago), it frees its place instead, and nothing reaches the server.
func TestAttackR18BClosedConnectionIsNoAnswerOfTheDependency(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Fail(codes.Unavailable))
	clock := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}},
		func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 4, Window: 10 * time.Second, CoolDown: time.Second,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		})
	rt := c.Runtime()
	for range 4 {
		if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("%v, want the server's UNAVAILABLE", err)
		}
	}
	atkWantBreaker(t, rt, atkStockReport, runtime.StateOpen, "breaker %v after 4 failures, want open")
	clock.Advance(2 * time.Second)
	cc.Close()
	_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
	if status.Code(err) != codes.Canceled || !strings.Contains(err.Error(), "closing") {
		t.Fatalf("after Close: %v, want gRPC's CANCELLED, the connection is closing", err)
	}
	if got := srv.Calls(atkStockReport); got != 4 {
		t.Errorf("server saw %d calls, want the 4 before Close", got)
	}
	// The probe took nothing from the dependency: still half-open, its
	// place free (a second call is let through as the probe, not refused).
	atkWantBreaker(t, rt, atkStockReport, runtime.StateHalfOpen, "breaker %v after a probe on a closed connection, want half-open: a closed connection is no success of the dependency")
	_, err = c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
	if status.Code(err) != codes.Canceled {
		t.Errorf("second call after Close: %v, want CANCELLED again (its probe place was freed), not the open breaker", err)
	}
}

// TestAttackR18BClosedConnectionStreamIsNoAnswerOfTheDependency: the same
// for a stream whose breaker is its own (so that its streams are the
// probes): opening it on a closed connection fails at NewStream with
// gRPC's CANCELLED, which must neither close the breaker nor keep its
// permit.
func TestAttackR18BClosedConnectionStreamIsNoAnswerOfTheDependency(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Fail(codes.Unavailable))
	clock := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}},
		func(p *policy.Service) {
			p.Breaker = nil
			atkMethod(p, atkWatchStock).Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: 10 * time.Second,
				CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		})
	rt := c.Runtime()
	for range 2 {
		st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%v, want the server's UNAVAILABLE", err)
		}
	}
	atkWantBreaker(t, rt, atkWatchStock, runtime.StateOpen, "stream breaker %v after 2 failures, want open")
	clock.Advance(2 * time.Second)
	cc.Close()
	st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Canceled {
		t.Fatalf("after Close: %v, want gRPC's CANCELLED", err)
	}
	atkWantBreaker(t, rt, atkWatchStock, runtime.StateHalfOpen, "stream breaker %v after a probe on a closed connection, want half-open")
	atkWantNoPermits(t, rt, atkWatchStock, "taken after a stream on a closed connection")
}
