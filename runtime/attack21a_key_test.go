package runtime_test

// Attacks on the idempotency key a generated client sends (README,
// "Retries and the retry budget", "Generated idempotency keys"): the key
// of a call is the request's, sent as idempotency-key on every attempt.

import (
	"context"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// attack21aKeys records the idempotency-key values each call brought to
// the server, every value, in order.
type attack21aKeys struct {
	mu   sync.Mutex
	seen [][]string
}

func (k *attack21aKeys) interceptor() grpc.ServerOption {
	return grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		k.mu.Lock()
		k.seen = append(k.seen, slices.Clone(md.Get(runtime.IdempotencyKeyHeader)))
		k.mu.Unlock()
		return h(ctx, req)
	})
}

func (k *attack21aKeys) calls() [][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.seen)
}

// TestAttack21aForwardedKeyIsNotSentBesideTheRequestsOwn: a service that
// forwards its incoming metadata to the services it calls (a gateway, a
// metadata-propagating middleware: metadata.NewOutgoingContext(ctx,
// incoming)) calls ReserveStock, keyed by order_id, from a context that
// already carries its own caller's idempotency-key. The call's key is the
// request's (README: "the client sends … as idempotency-key on every
// attempt"); the server must see that one value. The runtime appends the
// request's key after the forwarded one (metadata.AppendToOutgoingContext
// in runtime/unary.go), so the server sees two values: runtime/server's
// dedup refuses every such request with INVALID_ARGUMENT, the first
// attempt included, and a server that reads the first value dedups two
// orders of that caller under the caller's key.
func TestAttack21aForwardedKeyIsNotSentBesideTheRequestsOwn(t *testing.T) {
	attack21aBroken(t, "runtime/unary.go unary: metadata.AppendToOutgoingContext(ctx, IdempotencyKeyHeader, key) appends the request's key "+
		"to an idempotency-key the caller's context already carries (forwarded incoming metadata): the server gets two values, "+
		"and runtime/server refuses every such request INVALID_ARGUMENT; the request's key should replace the header's values")
	atkNoLeak(t)
	keys := &attack21aKeys{}
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{keys.interceptor()})
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)

	forwarded := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(runtime.IdempotencyKeyHeader, "upstream-order-7"))
	for _, order := range []string{"o-1", "o-2"} {
		if _, err := c.ReserveStock(forwarded, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "apple", Units: 1}); err != nil {
			t.Fatalf("ReserveStock %s: %v", order, err)
		}
	}
	got := keys.calls()
	if len(got) != 2 {
		t.Fatalf("the server saw %d calls, want 2", len(got))
	}
	for i, want := range []string{"o-1", "o-2"} {
		if !slices.Equal(got[i], []string{want}) {
			t.Errorf("call %d brought idempotency-key %q, want exactly the request's [%q]", i+1, got[i], want)
		}
	}
}

// TestAttack21aKeylessCallFromAForwardingContextSendsNoKey: the README
// says a keyed method's call without a key value "is sent once and
// without the idempotency-key header; the server's dedup never sees it,
// and two orders that both forgot their key are two orders, not one".
// From a context that forwards its caller's idempotency-key, two such
// ReserveStock calls (two orders, order_id empty) both carry the caller's
// key: the server's dedup takes them for one request (the second is
// refused INVALID_ARGUMENT for another body, or replayed the first's
// answer for the same body), where the runtime promised no key at all.
func TestAttack21aKeylessCallFromAForwardingContextSendsNoKey(t *testing.T) {
	attack21aBroken(t, "runtime/unary.go unary: a call without a key value leaves an idempotency-key the caller's context "+
		"forwards in the outgoing metadata; the README promises such a call is sent without the header")
	atkNoLeak(t)
	keys := &attack21aKeys{}
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{keys.interceptor()})
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)

	forwarded := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(runtime.IdempotencyKeyHeader, "upstream-order-7"))
	for _, units := range []int64{1, 2} {
		if _, err := c.ReserveStock(forwarded, &inventoryv1.ReserveStockRequest{Sku: "apple", Units: units}); err != nil {
			t.Fatalf("ReserveStock of %d units: %v", units, err)
		}
	}
	got := keys.calls()
	if len(got) != 2 {
		t.Fatalf("the server saw %d calls, want 2", len(got))
	}
	for i := range got {
		if len(got[i]) != 0 {
			t.Errorf("call %d without a key value brought idempotency-key %q, want none", i+1, got[i])
		}
	}
}
