package runtime_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
)

// TestAttackR18BNilCallOptionIsRefused: a nil grpc.CallOption among a
// call's options (a slice built with a hole, an option helper that
// returned nil) makes grpc-go panic deep in the call. The handles refuse
// it first, as a nil request, with INVALID_ARGUMENT naming the option's
// place, nothing sent and nothing taken, on every path: a plain call, a
// cached one (whose shared call would panic on its own goroutine), a
// stream.
func TestAttackR18BNilCallOptionIsRefused(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hole := []grpc.CallOption{grpc.WaitForReady(false), nil}
	check := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "option 1") {
			t.Errorf("%s with a nil option: %v, want INVALID_ARGUMENT naming option 1", what, err)
		}
	}
	for what, call := range map[string]func() error{
		"GetStock (cached)": func() error {
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, hole...)
			return err
		},
		"StockReport": func() error {
			_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{}, hole...)
			return err
		},
		"ReserveStock": func() error {
			_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o"}, hole...)
			return err
		},
		"WatchStock": func() error {
			_, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{}, hole...)
			return err
		},
	} {
		if p := r18Panicked(func() { check(what, call()) }); p != nil {
			t.Errorf("%s with a nil option panicked: %v", what, p)
		}
	}
	for _, m := range []string{atkGetStock, atkStockReport, atkWatchStock} {
		if got := srv.Calls(m); got != 0 {
			t.Errorf("server saw %d calls of %s, want none", got, m)
		}
		atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after a refused option")
	}
}
