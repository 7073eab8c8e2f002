package runtime_test

// Attack on the README's Streams: "From its opening to its end a stream
// holds one bulkhead permit … given back at once on each of these endings"
// and on Conn's "SendMsg refuses a nil message (INVALID_ARGUMENT, nothing
// sent, the stream still open)": hand-written code calling the plain
// generated client on Client.Conn (Invoke's doc names such code) with a nil
// request of a server-streaming method. protoc-gen-go-grpc's WatchStock
// sends the request inside the method and, on SendMsg's error, returns nil
// and the error: the caller gets no stream to cancel or read, so a stream
// the runtime keeps open after refusing the nil keeps its permit for as
// long as its context lives.

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestAttack24eNilRequestOfAPlainServerStreamGivesItsPermitBack(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := atkMethod(p, atkWatchStock)
		// A timeout far past the test: only the refusal itself may give the
		// permit back.
		m.Timeout, m.OverallTimeout = time.Hour, 0
		m.Bulkhead.MaxWait = 0
	})
	rt := c.Runtime()
	plain := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	permits := 0
	for _, m := range rt.Policy().Methods {
		if m.Name == atkWatchStock {
			permits = m.Bulkhead.Permits
		}
	}
	if permits == 0 {
		t.Fatal("WatchStock has no bulkhead of its own")
	}
	for i := range permits + 1 {
		st, err := plain.WatchStock(ctx, nil)
		if status.Code(err) != codes.InvalidArgument || st != nil {
			t.Fatalf("nil request %d: (%v, %v), want (nil, INVALID_ARGUMENT)", i+1, st, err)
		}
		if errors.Is(err, runtime.ErrBulkheadFull) {
			t.Fatalf("nil request %d refused by a full bulkhead", i+1)
		}
		if n := atkInUse(t, rt, atkWatchStock); n != 0 {
			t.Fatalf("%d permits taken after nil request %d, whose stream the caller never got", n, i+1)
		}
	}
	// The method still works, and the server never saw the refused ones.
	st, err := plain.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = st.Recv()
	}
	if got := fs.Calls(atkWatchStock); got != 1 {
		t.Errorf("the server saw %d streams, want 1", got)
	}
	atkWantNoPermits(t, rt, atkWatchStock, "after the last stream's io.EOF")
}
