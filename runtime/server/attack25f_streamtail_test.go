package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// bulkWatcher's WatchStock sends n messages of 8 KiB as fast as flow
// control lets it, and returns.
type bulkWatcher struct {
	*inventoryServer
	n        int
	returned atomic.Bool
	sendErr  atomic.Value
}

func (w *bulkWatcher) WatchStock(req *inventoryv1.WatchStockRequest, st inventoryv1.InventoryService_WatchStockServer) error {
	defer w.returned.Store(true)
	sku := strings.Repeat("x", 8<<10)
	for i := range w.n {
		if err := st.Send(&inventoryv1.WatchStockResponse{Sku: sku, Units: int64(i)}); err != nil {
			w.sendErr.Store(err)
			return err
		}
	}
	return nil
}

// TestAttack25fStreamTailAfterTheHandlerReturns: a stream that came
// without a deadline runs under the DefaultTimeout the tap sets on
// gRPC's own stream context, and the Guard cancels that context when the
// handler returns, its place given back. The handler of a server stream
// returns with the last of its messages still queued behind a caller
// that reads slowly (up to the flow-control window and gRPC's write
// quota): the cancellation must not cut them off. 200 messages of 8 KiB
// are read, slowly until the handler has returned, then at once: every
// one arrives, the stream ends OK, and the place is back.
func TestAttack25fStreamTailAfterTheHandlerReturns(t *testing.T) {
	p := inventoryPolicy()
	p.Methods[2].DefaultTimeout = time.Minute
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	w := &bulkWatcher{inventoryServer: &inventoryServer{}, n: 200}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, w, g.ServerOptions()...)))
	ctx, cancel := context.WithCancel(context.Background()) // no deadline: the DefaultTimeout's
	defer cancel()
	st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	got, atReturn := 0, -1
	for {
		_, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v (the handler's Send: %v)", got, err, w.sendErr.Load())
		}
		got++
		if !w.returned.Load() {
			time.Sleep(time.Millisecond)
		} else if atReturn < 0 {
			atReturn = got
		}
	}
	if got != w.n {
		t.Errorf("%d messages arrived, the handler sent %d", got, w.n)
	}
	if atReturn < 0 || atReturn >= w.n {
		t.Errorf("the handler returned with %d of %d messages read: no tail was left queued, the test tests nothing", atReturn, w.n)
	}
	t.Logf("the handler returned with %d of %d messages read", atReturn, w.n)
	eventually(t, "the place back", func() bool { return stats(t, g).InFlight == 0 })
}
