package runtime_test

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

// TestAttack22dLateAnswerAfterTheNewerOneWasEvicted: as
// TestAttack22aLateAnswerOfAnAbandonedSharedCallDoesNotReplaceANewerOne,
// with room for one key: caller A abandons apple's shared call, B's new
// one answers units 2, then pear takes apple's place, and only then does
// A's attempt answer units 1, the older reading. It must not be kept:
// callers already had the newer. Before, the flights' numbers were kept
// with the entries only, and an evicted entry's number was forgotten: the
// older reading came back as fresh for fresh_ttl.
func TestAttack22dLateAnswerAfterTheNewerOneWasEvicted(t *testing.T) {
	atkNoLeak(t)
	inv := &attack22aVersions{started: make(chan struct{}), release: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(runtime.ServerOptions()...)
	inventoryv1.RegisterInventoryServiceServer(gs, inv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	// returned is closed when the first call's answer is back in the
	// client (the interceptor sits just below the runtime's attempt).
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
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.RateLimit = nil
			m := atkMethod(p, atkGetStock)
			m.RateLimit = nil
			m.Timeout, m.OverallTimeout, m.Retry, m.Hedging = 5*time.Second, 0, nil, nil
			m.Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 1}
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &inventoryv1.GetStockRequest{Sku: "apple"}

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

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.GetStock(ctx, req)
	if err != nil || resp.GetUnits() != 2 {
		t.Fatalf("caller B: %v, %v; want units 2 from a new shared call", resp, err)
	}

	// Another key takes apple's place: B's answer is evicted.
	if resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "pear"}); err != nil || resp.GetUnits() != 2 {
		t.Fatalf("pear: %v, %v", resp, err)
	}
	close(inv.release)
	<-returned
	// The abandoned shared call keeps its answer a moment after its
	// attempt returned: give it that moment, many times over.
	time.Sleep(50 * time.Millisecond)
	for i := range 3 {
		resp, err := c.GetStock(ctx, req)
		if err != nil || resp.GetUnits() != 2 {
			t.Fatalf("call %d after B: %v, %v; want units 2 (B's reading, or a new one), not the older answer of the call A abandoned, kept once B's was evicted", i+1, resp, err)
		}
	}
}
