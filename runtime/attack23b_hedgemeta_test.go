package runtime_test

// Attack on hedging × the caller's grpc.Header, Trailer and Peer options ×
// OnFinish × the fallback: "the caller's grpc.Header, Trailer and Peer
// targets get the metadata of the copy whose result is returned", and
// OnFinish runs once, with what the caller gets.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack23bCopy tells its call's number in its header (sent at once) and
// its trailer, then does b.
func attack23bCopy(b server.Behaviour) server.Behaviour {
	return func(ctx context.Context, c server.Call) error {
		n := fmt.Sprint(c.N)
		if err := grpc.SendHeader(ctx, metadata.Pairs("copy", n)); err != nil {
			return err
		}
		if err := grpc.SetTrailer(ctx, metadata.Pairs("copy-trailer", n)); err != nil {
			return err
		}
		return b(ctx, c)
	}
}

// attack23bOptions are the caller's Header, Trailer and Peer options,
// by value or as pointers to grpc-go's option types (which are call
// options too: their methods take a value, and grpc-go calls them so).
type attack23bOptions struct {
	hdr, tlr metadata.MD
	p        peer.Peer
}

func (o *attack23bOptions) list(pointers bool) []grpc.CallOption {
	if pointers {
		return []grpc.CallOption{&grpc.HeaderCallOption{HeaderAddr: &o.hdr},
			&grpc.TrailerCallOption{TrailerAddr: &o.tlr}, &grpc.PeerCallOption{PeerAddr: &o.p}}
	}
	return []grpc.CallOption{grpc.Header(&o.hdr), grpc.Trailer(&o.tlr), grpc.Peer(&o.p)}
}

func (o *attack23bOptions) want(t *testing.T, what, copy string) {
	t.Helper()
	if got := o.hdr.Get("copy"); len(got) != 1 || got[0] != copy {
		t.Errorf("%s: the caller's header says copy %q, want %q", what, got, copy)
	}
	if got := o.tlr.Get("copy-trailer"); len(got) != 1 || got[0] != copy {
		t.Errorf("%s: the caller's trailer says copy %q, want %q", what, got, copy)
	}
	if o.p.Addr == nil {
		t.Errorf("%s: the caller's peer is empty", what)
	}
}

// TestAttack23bHedgedMetadataIsTheAnsweringCopys: a hedged GetStock (a
// copy after 20 ms, up to 2). The first copy sends its header and is held
// until the call ends; the second answers. The caller's header and
// trailer are the second copy's, OnFinish runs once with nil, the server
// saw two calls. Then both copies fail with UNAVAILABLE (non-fatal), the
// second last, and the fallback answers: the metadata is the second
// copy's, the last heard, OnFinish once with nil. Then the first copy
// fails and the budget refuses the second: the metadata is the first
// copy's, OnFinish once with the error the caller got, which matches
// ErrBudgetExhausted. Options by value and as pointers alike.
func TestAttack23bHedgedMetadataIsTheAnsweringCopys(t *testing.T) {
	for _, pointers := range []bool{false, true} {
		t.Run(fmt.Sprint("pointers ", pointers), func(t *testing.T) {
			atkNoLeak(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hedging := func(budget *policy.Budget) func(p *policy.Service) {
				return func(p *policy.Service) {
					m := attack23mHedged(p)
					m.Hedging.NonFatalCodes = policy.CodesOf(codes.Unavailable)
					if budget != nil {
						p.Budget = budget
					}
				}
			}

			// The second copy answers; the first, held, loses.
			srv, cc := startFault(t, faultserver.PerCall(attack23bCopy(server.Hang), attack23bCopy(server.Healthy)))
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, hedging(nil))
			var o attack23bOptions
			var f attack22aFinishes
			resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, append(o.list(pointers), f.option())...)
			if err != nil || resp.GetUnits() != 42 {
				t.Fatalf("hedged GetStock: %v %v, want the second copy's answer", resp, err)
			}
			if n := srv.Calls(atkGetStock); n != 2 {
				t.Fatalf("the server saw %d calls, want 2", n)
			}
			o.want(t, "the second copy answered", "2")
			f.wantOnce(t, "the second copy answered", codes.OK)

			// Both fail; the fallback answers.
			srv2, cc2 := startFault(t, attack23bCopy(server.Fail(codes.Unavailable)))
			var fellBack error
			c2 := atkInventory(t, cc2, inventoryv1.InventoryServiceResilientOptions{
				GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
					fellBack = err
					return &inventoryv1.GetStockResponse{Units: -1}, nil
				},
			}, hedging(nil))
			o = attack23bOptions{}
			f = attack22aFinishes{}
			resp, err = c2.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, append(o.list(pointers), f.option())...)
			if err != nil || resp.GetUnits() != -1 || status.Code(fellBack) != codes.Unavailable {
				t.Fatalf("hedged GetStock, both copies failing: %v %v (fallback saw %v), want the fallback's answer", resp, err, fellBack)
			}
			if n := srv2.Calls(atkGetStock); n != 2 {
				t.Fatalf("the server saw %d calls, want 2", n)
			}
			o.want(t, "both failed, the fallback answered", "2")
			f.wantOnce(t, "both failed, the fallback answered", codes.OK)

			// The first fails; the budget refuses the second.
			srv3, cc3 := startFault(t, attack23bCopy(server.Fail(codes.Unavailable)))
			c3 := atkInventory(t, cc3, inventoryv1.InventoryServiceResilientOptions{},
				hedging(&policy.Budget{Ratio: 0.01, MinRetries: 0, Window: time.Minute}))
			o = attack23bOptions{}
			f = attack22aFinishes{}
			_, err = c3.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, append(o.list(pointers), f.option())...)
			if !errors.Is(err, runtime.ErrBudgetExhausted) || status.Code(err) != codes.Unavailable {
				t.Fatalf("hedged GetStock, second copy refused by the budget: %v, want UNAVAILABLE matching ErrBudgetExhausted", err)
			}
			if n := srv3.Calls(atkGetStock); n != 1 {
				t.Fatalf("the server saw %d calls, want 1", n)
			}
			o.want(t, "the budget refused the second copy", "1")
			f.wantOnce(t, "the budget refused the second copy", codes.Unavailable)
			if fs := f.got(); len(fs) == 1 && fs[0] != err {
				t.Errorf("OnFinish ran with %v, the caller got %v", fs[0], err)
			}
		})
	}
}
