package runtime_test

// Attacks on the idempotency key a generated client sends (README,
// "Retries and the retry budget", "Generated idempotency keys"): the key
// of a call is the request's, sent as idempotency-key on every attempt.

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
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack21aKeys records the idempotency-key values each call brought to
// the server, every value, in order.
type attack21aKeys struct {
	mu         sync.Mutex
	seen       [][]string
	priorities [][]string
}

func (k *attack21aKeys) interceptor() grpc.ServerOption {
	return grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		k.mu.Lock()
		k.seen = append(k.seen, slices.Clone(md.Get(runtime.IdempotencyKeyHeader)))
		k.priorities = append(k.priorities, slices.Clone(md.Get(runtime.PriorityHeader)))
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
// attempt"); the server must see that one value. The runtime appended the
// request's key after the forwarded one (metadata.AppendToOutgoingContext
// in runtime/unary.go), so the server saw two values: runtime/server's
// dedup refuses every such request with INVALID_ARGUMENT, the first
// attempt included, and a server that reads the first value dedups two
// orders of that caller under the caller's key. The handle now drops the
// forwarded header first (withoutForwardedKey); the method's priority,
// appended after, still travels.
func TestAttack21aForwardedKeyIsNotSentBesideTheRequestsOwn(t *testing.T) {
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
	keys.mu.Lock()
	defer keys.mu.Unlock()
	for i, p := range keys.priorities {
		if !slices.Equal(p, []string{"high"}) {
			t.Errorf("call %d brought priority %q, want ReserveStock's [high]", i+1, p)
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
// The handle of a keyed method now drops the forwarded header.
func TestAttack21aKeylessCallFromAForwardingContextSendsNoKey(t *testing.T) {
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

// TestAttack21aHandSetKeyOfAMethodWithoutOneTravels: the boundary of the
// rule above. Charge sends no key of the runtime's (no key field, no
// generated key): an idempotency-key its caller sets on the context by
// hand is the caller's to send, and travels as set.
func TestAttack21aHandSetKeyOfAMethodWithoutOneTravels(t *testing.T) {
	atkNoLeak(t)
	keys := &attack21aKeys{}
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{keys.interceptor()})
	c, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), runtime.IdempotencyKeyHeader, "charge-by-hand-1")
	if _, err := c.Charge(ctx, &paymentsv1.ChargeRequest{OrderId: "o-1", AmountCents: 100}); err != nil {
		t.Fatal(err)
	}
	if got := keys.calls(); len(got) != 1 || !slices.Equal(got[0], []string{"charge-by-hand-1"}) {
		t.Errorf("the server saw idempotency-key %q, want the caller's own [charge-by-hand-1]", got)
	}
}

// TestAttack21aGeneratedKeyReplacesAForwardedOne: a method with a
// generated key, retried on UNAVAILABLE, called from a context that
// forwards its caller's idempotency-key: each of its three attempts
// carries one value, the key the runtime generated for the call, the
// same on every attempt, never the caller's.
func TestAttack21aGeneratedKeyReplacesAForwardedOne(t *testing.T) {
	atkNoLeak(t)
	keys := &attack21aKeys{}
	_, cc := startFaultWith(t, server.Fail(codes.Unavailable), []grpc.ServerOption{keys.interceptor()})
	rt, err := runtime.NewClient(&policy.Service{Name: attack20bDep, Methods: []policy.Method{{
		Name: atkGetStock, Kind: policy.KindUnary, GenerateIdempotencyKey: true, Timeout: 5 * time.Second,
		Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
			Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := runtime.NewUnary(rt, atkGetStock, inventoryv1.NewInventoryServiceClient(rt.Conn(cc)).GetStock,
		runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{})
	if err != nil {
		t.Fatal(err)
	}
	forwarded := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(runtime.IdempotencyKeyHeader, "upstream-order-7"))
	if _, err := h.Call(forwarded, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE after the retries", err)
	}
	got := keys.calls()
	if len(got) != 3 {
		t.Fatalf("the server saw %d attempts, want 3", len(got))
	}
	for i, k := range got {
		if len(k) != 1 || k[0] == "upstream-order-7" || len(k[0]) != 26 || k[0] != got[0][0] {
			t.Errorf("attempt %d brought idempotency-key %q, want the one generated key of the call (first %q)", i+1, k, got[0])
		}
	}
}
