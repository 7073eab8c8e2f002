package example_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// TestAttackR18eShedCopyDoesNotEndTheHedge: GetStock hedged with the
// default non-fatal codes against a service that sheds with
// RESOURCE_EXHAUSTED, as the example's does, and has room for one
// request: the first copy is admitted and runs, the second is shed. The
// shed copy is the server refusing extra load, not the call's answer: the
// caller gets the first copy's answer, and no more copies are sent after
// the refusal: once the second copy was shed the first holds its place a
// further shedHedgeDelay and 100 ms, past the turn of a third copy, which,
// sent, would be shed too.
func TestAttackR18eShedCopyDoesNotEndTheHedge(t *testing.T) {
	r := newHedgeShedRig(t, codes.ResourceExhausted, 50*time.Millisecond, 1, shedHedgeDelay+100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "hedged"})
	if err != nil || resp.GetUnits() != 42 {
		t.Errorf("hedged GetStock, a copy shed: %v, %v; want the answer of the copy the server admitted", resp, err)
	}
	if n, c := r.srv.Calls(getStock), r.srv.Cancelled(getStock); n != 1 || c != 0 {
		t.Errorf("the handler ran %d times, %d of them cancelled; want 1 run to its end", n, c)
	}
	if s := r.stats(); s.Shed[rserver.PriorityNormal] != 1 || s.InFlight != 0 {
		t.Errorf("guard stats %+v: want one copy shed (none sent after it) and no place held", s)
	}
}
