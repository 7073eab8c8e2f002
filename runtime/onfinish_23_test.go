package runtime_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// TestOnFinish23IsTheCallWithoutIt: a call given grpc.OnFinish beside
// another option is checked once and then made by a path of its own
// (UnaryHandle.finishing), which must send what the same call without
// OnFinish sends. ReserveStock (keyed by order_id, priority high), called
// with a forwarded idempotency-key and a grpc.Header option, with and
// without OnFinish: the server sees the same metadata both times (the
// request's key only, the method's priority), the caller its headers;
// OnFinish runs once with nil. A key gRPC cannot carry is refused before
// anything is sent, with OnFinish run once with the refusal.
func TestOnFinish23IsTheCallWithoutIt(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	var seen [][2][]string // per call: idempotency-key values, priority values
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen = append(seen, [2][]string{md.Get("idempotency-key"), md.Get(runtime.PriorityHeader)})
		mu.Unlock()
		return nil
	})
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	forwarded := metadata.AppendToOutgoingContext(ctx, "idempotency-key", "forwarded-23")

	for _, withFinish := range []bool{false, true} {
		var f attack22aFinishes
		var hdr metadata.MD
		opts := []grpc.CallOption{grpc.Header(&hdr)}
		if withFinish {
			opts = append(opts, f.option())
		}
		if _, err := c.ReserveStock(forwarded, &inventoryv1.ReserveStockRequest{OrderId: "order-23", Sku: "apple", Units: 1}, opts...); err != nil {
			t.Fatalf("ReserveStock (OnFinish %v): %v", withFinish, err)
		}
		if hdr == nil {
			t.Errorf("OnFinish %v: the caller's grpc.Header got nothing", withFinish)
		}
		if withFinish {
			f.wantOnce(t, "an answered call", codes.OK)
		}
	}
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("the server saw %d calls, want 2", len(got))
	}
	if want := []string{"order-23"}; !slices.Equal(got[0][0], want) || !slices.Equal(got[1][0], want) {
		t.Errorf("idempotency-key seen without OnFinish %q, with %q; want %q both times", got[0][0], got[1][0], want)
	}
	if len(got[0][1]) != 1 || !slices.Equal(got[0][1], got[1][1]) {
		t.Errorf("priority seen without OnFinish %q, with %q; want the method's, the same", got[0][1], got[1][1])
	}

	var f attack22aFinishes
	var hdr metadata.MD
	_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "bad\x01", Sku: "apple", Units: 1}, grpc.Header(&hdr), f.option())
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a key with byte 0x01: %v, want INVALID_ARGUMENT", err)
	}
	f.wantOnce(t, "a refused key", codes.InvalidArgument)
	if fs := f.got(); len(fs) == 1 && fs[0] != err {
		t.Errorf("OnFinish ran with %v, the caller got %v", fs[0], err)
	}
	if n := srv.Calls(atkReserveStock); n != 2 {
		t.Errorf("the server saw %d calls of ReserveStock, want 2 (the refused key sent nothing)", n)
	}
}
