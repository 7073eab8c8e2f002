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

// TestCallOptionWithANilAddressIsRefused: grpc.Header(nil),
// grpc.Trailer(nil), grpc.Peer(nil) and grpc.OnFinish(nil) are options
// grpc-go panics on inside the call (it writes through the address, or
// calls the function, once the attempt ends; a stream's on gRPC's own
// goroutine, which ended the test binary), and grpc.ForceCodec(nil) and
// grpc.CallCustomCodec(nil) as it writes the request: after the layers took a
// token, a permit or a probe, or on a cache's shared goroutine; as a nil
// option, each is refused INVALID_ARGUMENT naming its place, nothing sent,
// on every handle.
func TestCallOptionWithANilAddressIsRefused(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, bad := range []grpc.CallOption{grpc.Header(nil), grpc.Trailer(nil), grpc.Peer(nil), grpc.OnFinish(nil), grpc.ForceCodec(nil), grpc.CallCustomCodec(nil)} {
		hole := []grpc.CallOption{grpc.WaitForReady(false), bad}
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
			var err error
			if p := r18Panicked(func() { err = call() }); p != nil {
				t.Errorf("%s with %T of a nil address panicked: %v", what, bad, p)
				continue
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "option 1") {
				t.Errorf("%s with %T of a nil address: %v, want INVALID_ARGUMENT naming option 1", what, bad, err)
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
