package runtime_test

// Attacks on the cache (README, "Cache"): "An attempt already on the wire
// is not cut: it runs to its end, within the method's limit, and a
// success is kept for the next caller."

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack22aVersions is an inventory whose GetStock answers its first call
// with units 1, once release is closed, and every later call at once with
// units 2: the stock as it was, read slowly, and as it is now.
type attack22aVersions struct {
	inventoryv1.UnimplementedInventoryServiceServer
	calls   atomic.Int32
	started chan struct{} // closed when the first call arrived
	release chan struct{}
}

func (s *attack22aVersions) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	if s.calls.Add(1) == 1 {
		close(s.started)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: 1}, nil
	}
	return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: 2}, nil
}

// startAttack22aVersions serves a new attack22aVersions on loopback and
// dials it; returned is closed when the first call's answer is back in
// the client (the interceptor sits just below the runtime's attempt).
func startAttack22aVersions(t *testing.T) (*attack22aVersions, *grpc.ClientConn, <-chan struct{}) {
	t.Helper()
	inv := &attack22aVersions{started: make(chan struct{}), release: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(runtime.ServerOptions()...)
	inventoryv1.RegisterInventoryServiceServer(gs, inv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	returned := make(chan struct{})
	var first atomic.Bool
	cc, err := grpc.NewClient(lis.Addr().String(), append(runtime.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			isFirst := first.CompareAndSwap(false, true)
			err := invoker(ctx, method, req, reply, cc, opts...)
			if isFirst {
				close(returned)
			}
			return err
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return inv, cc, returned
}

// abandonAttack22a builds a client of inv's server (cc) caching GetStock
// by sku in maxEntries entries, and has caller A's GetStock of req hang
// on the server and give up: the shared call is abandoned, its attempt
// still on the wire until inv.release is closed.
func abandonAttack22a(t *testing.T, inv *attack22aVersions, cc *grpc.ClientConn, req *inventoryv1.GetStockRequest, maxEntries int) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := atkMethod(p, atkGetStock)
		m.Timeout, m.OverallTimeout, m.Retry, m.Hedging = 5*time.Second, 0, nil, nil
		m.Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: maxEntries}
	})
	actx, cancelA := context.WithCancel(context.Background())
	aDone := make(chan error, 1)
	go func() {
		_, err := c.GetStock(actx, req)
		aDone <- err
	}()
	<-inv.started
	cancelA()
	if err := <-aDone; status.Code(err) != codes.Canceled {
		t.Fatalf("caller A: %v, want CANCELLED", err)
	}
	return c
}

// TestAttack22aLateAnswerOfAnAbandonedSharedCallDoesNotReplaceANewerOne:
// caller A's GetStock hangs on the server; A gives up, leaving the shared
// call's attempt on the wire. Caller B then starts a new shared call,
// which answers units 2 at once, kept as fresh. A's attempt then answers
// units 1, the older reading: it must not replace B's answer, which came
// from a request sent after it. Before, the cache kept whichever answer
// came back last, and served the older one as fresh for the whole
// fresh_ttl to every caller that had already seen the newer.
func TestAttack22aLateAnswerOfAnAbandonedSharedCallDoesNotReplaceANewerOne(t *testing.T) {
	atkNoLeak(t)
	inv, cc, returned := startAttack22aVersions(t)
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	c := abandonAttack22a(t, inv, cc, req, 10)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.GetStock(ctx, req)
	if err != nil || resp.GetUnits() != 2 {
		t.Fatalf("caller B: %v, %v; want units 2 from a new shared call", resp, err)
	}

	close(inv.release)
	<-returned
	// The abandoned shared call keeps its answer a moment after its
	// attempt returned: give it that moment, many times over.
	time.Sleep(50 * time.Millisecond)
	for i := range 3 {
		resp, err := c.GetStock(ctx, req)
		if err != nil || resp.GetUnits() != 2 {
			t.Fatalf("call %d after B: %v, %v; want B's fresh units 2, not the older answer of the call A abandoned", i+1, resp, err)
		}
	}
	if n := inv.calls.Load(); n != 2 {
		t.Errorf("the server saw %d GetStock calls, want 2 (A's and B's; the rest are fresh hits)", n)
	}
}
