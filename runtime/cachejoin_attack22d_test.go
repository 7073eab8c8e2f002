package runtime_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack22dJoinerOfASharedCallThatFailedOnItsStartersSide: GetStock
// cached with a stale answer kept; an interceptor takes 100 ms before
// each call (a token fetched, say). Caller A starts the shared call with
// outgoing metadata gRPC cannot carry (a forwarded header that is not
// ASCII); caller B, whose metadata is fine, joins it. The shared call,
// made with A's values, fails on the client's side: A must get gRPC's
// INTERNAL (no stale answer hides A's defect), but B made no such
// mistake and must not get A's failure for its own. Before, B got A's
// INTERNAL (it had got the stale answer until stale answers stopped
// standing in for client-side failures).
func TestAttack22dJoinerOfASharedCallThatFailedOnItsStartersSide(t *testing.T) {
	atkNoLeak(t)
	slow := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	srv, cc := startFault(t, server.Healthy, slow)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		m := attack22dPlain(p)
		m.Timeout = 5 * time.Second
		m.Cache = &policy.Cache{KeyFields: []string{"sku"}, FreshTTL: time.Millisecond, StaleTTL: time.Hour, MaxEntries: 10}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	apple := &inventoryv1.GetStockRequest{Sku: "apple"}
	if _, err := c.GetStock(ctx, apple); err != nil {
		t.Fatalf("the first call: %v", err)
	}
	time.Sleep(5 * time.Millisecond) // past fresh_ttl: the answer is stale

	aErr := make(chan error, 1)
	go func() {
		_, err := c.GetStock(metadata.AppendToOutgoingContext(ctx, "x-forwarded-name", "Zo\xeb"), apple)
		aErr <- err
	}()
	time.Sleep(30 * time.Millisecond) // A's shared call is in the interceptor
	resp, err := c.GetStock(ctx, apple)
	if err := <-aErr; status.Code(err) != codes.Internal {
		t.Errorf("caller A: %v, want gRPC's INTERNAL for its own metadata", err)
	}
	if err != nil {
		t.Fatalf("caller B, whose metadata is fine: %v; want an answer (its own call's, or the stale one), not A's failure", err)
	}
	if resp.GetSku() != "apple" {
		t.Errorf("caller B: %v", resp)
	}
	if n := srv.Calls(atkGetStock); n != 2 {
		t.Errorf("the server saw %d calls, want 2 (the first, and B's own; A's was never sent)", n)
	}
}
