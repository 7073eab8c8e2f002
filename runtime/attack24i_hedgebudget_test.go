package runtime_test

// Attack 24i on the hedged call's budget: "the first copy let through,
// whatever its number, is the call's request", its charge given back,
// and copy 1 let through after it charged "without asking" (budget.charge).
// Between the give-back and the charge, another call may take the retry
// given back: the budget would then hold one retry more than it allows.

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack24iTinyHedgesNeverPassTheBudget: README, Retries and the retry
// budget: retries ≤ ratio × requests + min_retries. 200 callers at once,
// each 5 hedged GetStocks in a row, each of 2 copies 1 ns apart, on a clock that does not
// move, against a server that fails every call UNAVAILABLE (non-fatal):
// the budget (ratio 0.01, min 3) is spent at once and every call after
// races for the retries given back by calls whose copy 2 was let through
// before copy 1. The server tells the calls apart by a header: the copies
// beyond each call's first are at most 1 % of the calls plus 3.
func TestAttack24iTinyHedgesNeverPassTheBudget(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	seen := map[string]int{}
	srv, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		md, _ := metadata.FromIncomingContext(ctx)
		if id := md.Get("x-call"); len(id) == 1 {
			mu.Lock()
			seen[id[0]]++
			second := seen[id[0]] > 1
			mu.Unlock()
			if second {
				// The copy that came second answers late: a copy 1 let
				// through after copy 2 ends well after it.
				time.Sleep(40 * time.Millisecond)
			}
		}
		return status.Error(codes.Unavailable, "down")
	})
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(newAtkClock())},
	}, func(p *policy.Service) {
		attack24bTinyHedge(p)
		p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 3, Window: time.Minute}
	})
	const n, each = 200, 5
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			for k := range each {
				ctx := metadata.AppendToOutgoingContext(context.Background(), "x-call", strconv.Itoa(i*each+k))
				if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.Unavailable {
					t.Errorf("got %v, want UNAVAILABLE", err)
				}
			}
		})
	}
	close(gate)
	wg.Wait()
	mu.Lock()
	requests := len(seen)
	mu.Unlock()
	extra := srv.Calls(atkGetStock) - requests
	if allowance := requests/100 + 3; extra > allowance {
		t.Errorf("after %d calls the server saw %d copies beyond each call's first, want at most %d", requests, extra, allowance)
	}
}
