package runtime_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack27eSeen is what a connection interceptor saw on one invocation.
type attack27eSeen struct {
	inKey  []string // ValueFromIncomingContext(idempotency-key)
	tenant []string // ValueFromIncomingContext(x-tenant)
	outKey []string // the outgoing idempotency-key
}

// attack27eStart serves the example with b and dials it with a unary
// interceptor that records what every invocation (attempt, hedged copy)
// sees of its context.
func attack27eStart(t *testing.T, b server.Behaviour) (*server.Server, *grpc.ClientConn, func() []attack27eSeen) {
	t.Helper()
	srv, err := server.Start("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []attack27eSeen
	)
	rec := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		out, _ := metadata.FromOutgoingContext(ctx)
		mu.Lock()
		seen = append(seen, attack27eSeen{
			inKey:  metadata.ValueFromIncomingContext(ctx, runtime.IdempotencyKeyHeader),
			tenant: metadata.ValueFromIncomingContext(ctx, "x-tenant"),
			outKey: out.Get(runtime.IdempotencyKeyHeader),
		})
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithChainUnaryInterceptor(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
	})
	return srv, cc, func() []attack27eSeen {
		mu.Lock()
		defer mu.Unlock()
		s := seen
		seen = nil
		return s
	}
}

// attack27eServing is the context of a handler serving a keyed request:
// incoming metadata built by hand, with a mixed-case key of two values.
func attack27eServing(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return metadata.NewIncomingContext(ctx, metadata.MD{"Idempotency-Key": {"up-1", "up-2"}, "X-Tenant": {"t-27e"}})
}

// TestAttack27EEveryHedgedCopyAndRetrySeesTheHiddenKey: README,
// "Generated idempotency keys": a generated key is "the same on every
// attempt and hedged copy of one call", and on a call whose key is the
// runtime's "the call's context hides the caller's incoming
// idempotency-key from the interceptors". A hedged GetStock with a
// generated key (first copy hangs, three copies 20 ms apart) and a
// ReserveStock retried twice on UNAVAILABLE, both called from a handler
// whose incoming metadata carries "Idempotency-Key: up-1, up-2" and a
// tenant header: every copy and attempt sees no incoming key, the tenant
// as it was, and sends one key, the same on each, never up-1 or up-2.
func TestAttack27EEveryHedgedCopyAndRetrySeesTheHiddenKey(t *testing.T) {
	srv, cc, seen := attack27eStart(t, func(ctx context.Context, c server.Call) error {
		switch {
		case c.Method == getStock && c.N == 1:
			return server.Hang(ctx, c)
		case c.Method == reserveStock && c.N <= 2:
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	})
	p := inventoryPolicy()
	p.Methods[0] = policy.Method{Name: getStock, Idempotent: true, GenerateIdempotencyKey: true, Timeout: 3 * time.Second,
		Hedging: hedging(20*time.Millisecond, 3)}
	h := bindInventory(t, p, cc, nil)
	ctx := attack27eServing(t)
	check := func(what string, n int, wantKey string) {
		t.Helper()
		got := seen()
		if len(got) < n {
			t.Errorf("%s: %d invocations seen by the interceptor, want %d", what, len(got), n)
		}
		for i, s := range got {
			if s.inKey != nil || !slices.Equal(s.tenant, []string{"t-27e"}) || len(s.outKey) != 1 || (wantKey != "" && s.outKey[0] != wantKey) ||
				s.outKey[0] != got[0].outKey[0] || s.outKey[0] == "up-1" || s.outKey[0] == "up-2" {
				t.Errorf("%s, invocation %d: incoming key %v (want hidden), tenant %v, sent %v (want one key, the same on each)",
					what, i+1, s.inKey, s.tenant, s.outKey)
			}
		}
	}
	if _, err := h.getStock.Call(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatalf("hedged GetStock: %v", err)
	}
	check("hedged GetStock with a generated key", 2, "")
	if keys := srv.Keys(getStock); len(keys) < 2 || keys[0] != keys[1] {
		t.Errorf("the server saw keys %q for the hedged copies, want one generated key", keys)
	}
	if _, err := h.reserveStock.Call(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-27e-r"}); err != nil {
		t.Fatalf("retried ReserveStock: %v", err)
	}
	check("ReserveStock retried twice", 3, "o-27e-r")
	if got := metadata.ValueFromIncomingContext(ctx, runtime.IdempotencyKeyHeader); !slices.Equal(got, []string{"up-1", "up-2"}) {
		t.Errorf("the handler's context after the calls: idempotency-key %v, want [up-1 up-2]", got)
	}
}

// TestAttack27EHidingCostsAnUnkeyedCallNothing: README, "Generated
// idempotency keys", "Calls that send no key of the runtime's … are left
// as they were … at no cost", and key.go, "A context that carries no such
// header is returned as it is, at the cost of two look-ups". From a
// handler's context whose incoming metadata carries the key and twenty
// other headers, an unkeyed call allocates nothing and its call sees the
// incoming key; a keyed call from a handler's context carrying twenty
// headers but no key allocates what it does from a bare context (no copy
// of the metadata).
func TestAttack27EHidingCostsAnUnkeyedCallNothing(t *testing.T) {
	s := newKeyedSchema(t)
	answer := dynamicpb.NewMessage(s.resp)
	var sawKey []string
	call := func(ctx context.Context, _ *dynamicpb.Message, _ ...grpc.CallOption) (*dynamicpb.Message, error) {
		sawKey = metadata.ValueFromIncomingContext(ctx, runtime.IdempotencyKeyHeader)
		return answer, nil
	}
	noted := func(ctx context.Context, _ *dynamicpb.Message, _ ...grpc.CallOption) (*dynamicpb.Message, error) {
		return answer, nil
	}
	bind := func(m policy.Method, c func(context.Context, *dynamicpb.Message, ...grpc.CallOption) (*dynamicpb.Message, error)) *runtime.UnaryHandle[dynamicpb.Message, dynamicpb.Message] {
		m.Name, m.Kind = keyedPlace, policy.KindUnary
		rt, err := runtime.NewClient(&policy.Service{Name: keyedService, Methods: []policy.Method{m}})
		if err != nil {
			t.Fatal(err)
		}
		var hooks runtime.UnaryHooks[dynamicpb.Message, dynamicpb.Message]
		if m.IdempotencyKey != "" {
			hooks.IdempotencyKey = func(*dynamicpb.Message) string { return "o-1" }
		}
		h, err := runtime.NewUnary(rt, keyedPlace, c, hooks)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	req := s.request("o-1")
	md := metadata.MD{"Idempotency-Key": {"up-1"}}
	plain := metadata.MD{}
	for i := range 20 {
		k := "x-h" + string(rune('a'+i))
		md[k], plain[k] = []string{"v"}, []string{"v"}
	}
	serving := metadata.NewIncomingContext(context.Background(), md)
	unkeyed := bind(policy.Method{}, call)
	if _, err := unkeyed.Call(serving, req); err != nil || !slices.Equal(sawKey, []string{"up-1"}) {
		t.Fatalf("an unkeyed call from a keyed handler: %v, its call saw idempotency-key %v; want [up-1], untouched", err, sawKey)
	}
	unkeyed = bind(policy.Method{}, noted)
	if a := testing.AllocsPerRun(200, func() { unkeyed.Call(serving, req) }); a != 0 { //nolint:errcheck // a noop
		t.Errorf("an unkeyed call from a handler's context carrying idempotency-key allocates %v times, want 0", a)
	}
	keyed := bind(policy.Method{IdempotencyKey: "order_id"}, noted)
	bare := testing.AllocsPerRun(200, func() { keyed.Call(context.Background(), req) })                                          //nolint:errcheck // a noop
	fromPlain := testing.AllocsPerRun(200, func() { keyed.Call(metadata.NewIncomingContext(context.Background(), plain), req) }) //nolint:errcheck // a noop
	withCtx := testing.AllocsPerRun(200, func() { _ = metadata.NewIncomingContext(context.Background(), plain) })
	if fromPlain != bare+withCtx {
		t.Errorf("a keyed call from a context with 20 incoming headers and no key allocates %v times, from a bare one %v "+
			"(+%v for making the context): the look-up copies the metadata", fromPlain, bare, withCtx)
	}
}
