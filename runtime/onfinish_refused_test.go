package runtime_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
)

// TestOnFinishRunsOnceOnEveryRefusal: the caller's grpc.OnFinish runs
// exactly once for a call or a stream the runtime ends before gRPC starts
// it, as grpc-go runs it for one it fails to start, and the server sees
// nothing: a context already over, a nil request, a nil call option beside
// the callback (the handles' refusal), and the same through Client.Conn's
// plain client. A caller that counts its calls down in the callback
// (a WaitGroup's Done) would otherwise wait forever.
func TestOnFinishRunsOnceOnEveryRefusal(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, nil)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
	plain := inventoryv1.NewInventoryServiceClient(c.Runtime().Conn(cc))
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	watch := &inventoryv1.WatchStockRequest{Sku: "apple"}
	nilOpt := grpc.Header(nil)
	for _, tc := range []struct {
		name string
		want codes.Code
		call func(opt grpc.CallOption) error
	}{
		{"unary, context over", codes.Canceled, func(o grpc.CallOption) error {
			_, err := c.GetStock(dead, req, o)
			return err
		}},
		{"unary, nil request", codes.InvalidArgument, func(o grpc.CallOption) error {
			_, err := c.GetStock(live, nil, o)
			return err
		}},
		{"unary, nil option beside it", codes.InvalidArgument, func(o grpc.CallOption) error {
			_, err := c.GetStock(live, req, o, nilOpt)
			return err
		}},
		{"stream, context over", codes.Canceled, func(o grpc.CallOption) error {
			_, err := c.WatchStock(dead, watch, o)
			return err
		}},
		{"stream, nil request", codes.InvalidArgument, func(o grpc.CallOption) error {
			_, err := c.WatchStock(live, nil, o)
			return err
		}},
		{"stream, nil option beside it", codes.InvalidArgument, func(o grpc.CallOption) error {
			_, err := c.WatchStock(live, watch, nilOpt, o)
			return err
		}},
		{"Conn unary, nil option beside it", codes.InvalidArgument, func(o grpc.CallOption) error {
			_, err := plain.GetStock(live, req, o, nilOpt)
			return err
		}},
		{"Conn stream, context over", codes.Canceled, func(o grpc.CallOption) error {
			_, err := plain.WatchStock(dead, watch, o)
			return err
		}},
		{"Conn stream, nil option beside it", codes.InvalidArgument, func(o grpc.CallOption) error {
			_, err := plain.WatchStock(live, watch, o, nilOpt)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f attack22aFinishes
			err := tc.call(f.option())
			if err == nil {
				t.Fatal("the call was not refused")
			}
			f.wantOnce(t, tc.name, tc.want)
			if got := f.got(); len(got) == 1 && got[0] != err {
				t.Errorf("OnFinish ran with %v, the caller got %v", got[0], err)
			}
		})
	}
	for _, m := range []string{inventoryv1.InventoryService_GetStock_FullMethodName, inventoryv1.InventoryService_WatchStock_FullMethodName} {
		if n := srv.Calls(m); n != 0 {
			t.Errorf("the server saw %d calls of %s, want none", n, m)
		}
	}
}
