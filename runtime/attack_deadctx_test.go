package runtime_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// A caller whose context is already over when it calls gets its context's
// own code (CANCELED or DEADLINE_EXCEEDED), at once, on a unary call and on
// a stream: the server sees nothing, no permit stays taken, no fallback
// answers, and however many such calls come, the breaker stays closed, for
// they say nothing about the dependency.
func TestAttackContextAlreadyOverSendsAndCountsNothing(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	var fellBack atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			fellBack.Add(1)
			return &inventoryv1.GetStockResponse{}, nil
		}}, nil)
	rt := c.Runtime()

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{{"canceled", canceled, codes.Canceled}, {"deadline passed", expired, codes.DeadlineExceeded}} {
		begin := time.Now()
		for range 30 { // more than the breaker's minimum of calls
			if _, err := c.GetStock(tc.ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != tc.want {
				t.Fatalf("%s: GetStock: %v, want %s", tc.name, err, tc.want)
			}
			st, err := c.WatchStock(tc.ctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
			if err == nil {
				_, err = st.Recv()
			}
			if err == io.EOF || status.Code(err) != tc.want {
				t.Fatalf("%s: WatchStock: %v, want %s", tc.name, err, tc.want)
			}
		}
		if took := time.Since(begin); took > time.Second {
			t.Errorf("%s: 60 calls on a dead context took %v, want at once", tc.name, took)
		}
	}
	if n := fs.Calls(atkGetStock) + fs.Calls(atkWatchStock); n != 0 {
		t.Errorf("the server saw %d calls from dead contexts, want 0", n)
	}
	if n := fellBack.Load(); n != 0 {
		t.Errorf("the fallback answered %d dead callers, want 0", n)
	}
	atkWantNoPermits(t, rt, atkGetStock, "taken after calls on dead contexts")
	atkWantNoPermits(t, rt, atkWatchStock, "taken after streams on dead contexts")
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "GetStock's breaker %v after calls on dead contexts, want closed")
	atkWantBreaker(t, rt, atkWatchStock, runtime.StateClosed, "WatchStock's breaker %v after streams on dead contexts, want closed")
	// The dependency is untouched: the next live call goes through.
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Errorf("a live call after the dead ones: %v", err)
	}
}
