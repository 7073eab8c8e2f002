package runtime_test

// Attack on the caller's grpc.Header, Trailer and Peer options embedded in
// an option type of the program's (grpc-go calls the embedded option's
// methods, and writes where it points): a cached method's shared call
// must leave them as they were (README "Cache"), and hedging must give
// them the answering copy's metadata (README "Hedging"), as for the
// options by value or by pointer.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Options of the program's that embed grpc-go's: by value, by pointer,
// behind an interface, and one level deeper.
type (
	header24a  struct{ grpc.HeaderCallOption }
	trailer24a struct{ *grpc.TrailerCallOption }
	peer24a    struct{ grpc.CallOption }
	deeper24a  struct{ inner24a }
	inner24a   struct{ grpc.HeaderCallOption }
)

// embedded24a are o's Header, Trailer and Peer options, each embedded in
// an option of the program's (the header, deeper too when deep).
func embedded24a(o *attack23bOptions, deep bool) []grpc.CallOption {
	var h grpc.CallOption = header24a{grpc.HeaderCallOption{HeaderAddr: &o.hdr}}
	if deep {
		h = &deeper24a{inner24a{grpc.HeaderCallOption{HeaderAddr: &o.hdr}}}
	}
	return []grpc.CallOption{h, trailer24a{&grpc.TrailerCallOption{TrailerAddr: &o.tlr}}, peer24a{grpc.Peer(&o.p)}}
}

// TestAttack24aCachedCallLeavesEmbeddedOptionsAlone: a cached GetStock
// given its caller's Header, Trailer and Peer options embedded in options
// of the program's: the shared call, on its own goroutine and possibly
// outliving its starter, leaves them as they were. Before, only grpc-go's
// own types were recognised, and gRPC wrote the starter's memory from the
// shared call's goroutine.
func TestAttack24aCachedCallLeavesEmbeddedOptionsAlone(t *testing.T) {
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprint("deep ", deep), func(t *testing.T) {
			atkNoLeak(t)
			srv, cc := startFault(t, server.Healthy)
			c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}, inventoryv1.InventoryServiceResilientOptions{})
			var o attack23bOptions
			resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}, embedded24a(&o, deep)...)
			if err != nil || resp.GetUnits() != 42 {
				t.Fatalf("GetStock: %v %v", resp, err)
			}
			if o.hdr != nil || o.tlr != nil || o.p.Addr != nil {
				t.Errorf("header %v, trailer %v, peer %v written by the shared call, want them left as they were", o.hdr, o.tlr, o.p.Addr)
			}
			if got := srv.Calls(atkGetStock); got != 1 {
				t.Errorf("server saw %d calls, want 1", got)
			}
		})
	}
}

// TestAttack24aHedgedEmbeddedOptionsGetTheAnsweringCopys: a hedged
// GetStock (a copy after 20 ms, up to 2) whose first copy sends its
// header and is held until the call ends, the second answering; the
// caller's options embedded in options of the program's. The caller's
// header and trailer are the second copy's, and stay so once the losing
// copy ended (checked after every goroutine of the call is gone): before,
// each copy wrote them itself, the loser last (a data race under -race).
func TestAttack24aHedgedEmbeddedOptionsGetTheAnsweringCopys(t *testing.T) {
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprint("deep ", deep), func(t *testing.T) {
			var o attack23bOptions
			var done bool
			t.Cleanup(func() { // after atkNoLeak's: the loser is gone
				if done {
					o.want(t, "once the losing copy ended", "2")
				}
			})
			atkNoLeak(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv, cc := startFault(t, faultserver.PerCall(attack23bCopy(server.Hang), attack23bCopy(server.Healthy)))
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) { attack23mHedged(p) })
			resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, embedded24a(&o, deep)...)
			if err != nil || resp.GetUnits() != 42 {
				t.Fatalf("hedged GetStock: %v %v, want the second copy's answer", resp, err)
			}
			if n := srv.Calls(atkGetStock); n != 2 {
				t.Fatalf("the server saw %d calls, want 2", n)
			}
			o.want(t, "the second copy answered", "2")
			done = true
		})
	}
}
