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

// TestAttack21aTypedNilCallOptionIsRefused: the README says a nil
// grpc.CallOption among a call's options is refused with INVALID_ARGUMENT
// naming its place, since grpc-go would panic on it inside the call, or
// on the goroutine of a cache's shared call. A nil pointer to an option
// type (var h *grpc.HeaderCallOption, an option helper of the program's
// returning a nil pointer) is as nil to grpc-go, which calls its value
// methods through it and panics, after the layers took a token, a permit
// or a probe; where no caller waits for a cache's shared call any more,
// that panic ends the program. The handles compared the option with nil
// only; they now refuse a typed nil too, on every path, nothing sent.
func TestAttack21aTypedNilCallOptionIsRefused(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var header *grpc.HeaderCallOption
	var peer *grpc.PeerCallOption
	for _, hole := range [][]grpc.CallOption{{grpc.WaitForReady(false), header}, {grpc.WaitForReady(false), peer}} {
		check := func(what string, err error) {
			t.Helper()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "option 1") {
				t.Errorf("%s with a nil %T option: %v, want INVALID_ARGUMENT naming option 1", what, hole[1], err)
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
				t.Errorf("%s with a nil %T option panicked: %v", what, hole[1], p)
			}
		}
	}
	for _, m := range []string{atkGetStock, atkStockReport, atkWatchStock, "/example.inventory.v1.InventoryService/ReserveStock"} {
		if got := srv.Calls(m); got != 0 {
			t.Errorf("server saw %d calls of %s, want none", got, m)
		}
	}
	atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after a refused option")
	atkWantNoPermits(t, c.Runtime(), atkWatchStock, "taken after a refused option")
}
