package runtime_test

// Attacks on the ways a stream ends that the earlier attacks left out:
// Header, which gRPC answers (nil, nil) once the stream is over without
// headers (a server that fails it at once: a trailers-only response),
// and which a caller reading the server's metadata first may take as the
// end.

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

// A stream the server fails at once: Header says (nil, nil), the stream is
// over on the wire. The permit goes back at once, as for Send's io.EOF,
// without waiting for a Recv the caller may never make; the outcome waits
// for Recv, which returns the status and counts it once.
func TestAttackR18StreamOverAtHeaderGivesItsPermitBack(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 2 // two failed streams open it, one does not
	})
	rt := c.Runtime()

	// The caller reads the header, finds none, and walks away: 4 times,
	// on a bulkhead of 4 permits, with no deadline.
	for i := range 4 {
		st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
		if err != nil {
			t.Fatalf("opening stream %d: %v", i+1, err)
		}
		md, err := st.Header()
		if md != nil || err != nil {
			t.Fatalf("Header of a stream failed at once: %v, %v; want nil, nil (gRPC's word for a stream over without headers)", md, err)
		}
		atkWantNoPermits(t, rt, atkWatchStock, "right after Header said the stream is over")
	}
	// A fifth gets a permit at once, so none was kept.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
	if errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("a fifth stream: %v: the four abandoned at Header kept their permits", err)
	}
	if err != nil {
		t.Fatalf("a fifth stream: %v", err)
	}
	// This one is read: Header, then Recv, which returns the status.
	if md, err := st.Header(); md != nil || err != nil {
		t.Fatalf("Header: %v, %v; want nil, nil", md, err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv after Header: %v, want UNAVAILABLE", err)
	}
	atkWantNoPermits(t, rt, atkWatchStock, "after Recv's error")
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed,
		"one stream read to its UNAVAILABLE (the others' outcomes are still unknown) left the breaker %v, want closed")
	if n := fs.Calls(atkWatchStock); n != 5 {
		t.Errorf("the server saw %d streams, want 5", n)
	}
}
