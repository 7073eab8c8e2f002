package runtime_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack23bCachedCallLeavesPointerOptionsAlone: the caller's
// grpc.Header, Trailer and Peer given as pointers to grpc-go's options
// (which grpc-go writes through) are left as they were by a cached
// method's shared call, as the options by value are: the shared call runs
// on its own goroutine and may outlive its starter.
func TestAttack23bCachedCallLeavesPointerOptionsAlone(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Healthy)
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}, inventoryv1.InventoryServiceResilientOptions{})
	var header, trailer metadata.MD
	var p peer.Peer
	resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"},
		&grpc.HeaderCallOption{HeaderAddr: &header}, &grpc.TrailerCallOption{TrailerAddr: &trailer}, &grpc.PeerCallOption{PeerAddr: &p})
	if err != nil || resp.GetUnits() != 42 {
		t.Fatalf("GetStock: %v %v", resp, err)
	}
	if header != nil || trailer != nil || p.Addr != nil {
		t.Errorf("header %v, trailer %v, peer %v written by the shared call, want them left as they were", header, trailer, p.Addr)
	}
	if got := srv.Calls(atkGetStock); got != 1 {
		t.Errorf("server saw %d calls, want 1", got)
	}
}
