package example_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// headerCreds is a credentials.PerRPCCredentials that adds fixed
// metadata to every call: a token source that also stamps the caller's
// own headers, or a "propagate these headers" helper written as
// credentials. gRPC applies it in the transport, after every
// interceptor, the runtime's included.
type headerCreds map[string]string

func (h headerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return h, nil
}
func (headerCreds) RequireTransportSecurity() bool { return false }

// keyRig is the example inventory service behind its Guard on a real
// Redis, reached through a TCP proxy by the generated client on a
// connection dialled with dialOpts.
type keyRig struct {
	*rig
	keys func() int64 // entries in Redis
}

func newKeyRig(t *testing.T, b server.Behaviour, guardOpts []rserver.Option, dialOpts []grpc.DialOption, clientOpts ...runtime.Option) *keyRig {
	t.Helper()
	rg, rdb := newRigDialled(t, b, guardOpts, dialOpts, clientOpts...)
	r := &keyRig{rig: rg, keys: func() int64 {
		n, err := rdb.DBSize(context.Background()).Result()
		if err != nil {
			t.Fatalf("redis DBSIZE: %v", err)
		}
		return n
	}}
	r.warm(t)
	return r
}

func ctx5s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAttack27ACredentialsKeyTravelsBesideTheRequestsOwn: README,
// "Generated idempotency keys": per-RPC credentials are outside the
// runtime's reach, as gRPC adds their metadata in the transport, after
// every interceptor: a connection (grpc.WithPerRPCCredentials) or a call
// (grpc.PerRPCCredentials) whose credentials carry an idempotency-key
// sends it beside the request's own, and the Guard refuses the two values
// INVALID_ARGUMENT without running the handler: the order fails, loudly,
// and is never run twice.
func TestAttack27ACredentialsKeyTravelsBesideTheRequestsOwn(t *testing.T) {
	creds := headerCreds{runtime.IdempotencyKeyHeader: "callers-key"}
	for _, tc := range []struct {
		name     string
		dial     []grpc.DialOption
		callOpts []grpc.CallOption
	}{
		{"connection credentials", []grpc.DialOption{grpc.WithPerRPCCredentials(creds)}, nil},
		{"call credentials", nil, []grpc.CallOption{grpc.PerRPCCredentials(creds)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newKeyRig(t, server.Healthy, nil, tc.dial, longTimeouts)
			before := r.srv.Calls(reserveStock)
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-27a-1", Sku: "apple", Units: 1}
			_, err := r.client.ReserveStock(ctx5s(t), req, tc.callOpts...)
			runs := r.srv.Calls(reserveStock) - before
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "more than once (2 values)") || runs != 0 {
				t.Errorf("README (Generated idempotency keys): credentials carrying %s send it beside the request's key, "+
					"refused INVALID_ARGUMENT, the handler not run; got %v, %d runs", runtime.IdempotencyKeyHeader, err, runs)
			}
		})
	}
}

// TestAttack27ACredentialsKeyMergesKeylessOrders: README, "Generated
// idempotency keys": credentials carrying an idempotency-key send it in
// place of a key on a call without a key value, and the server takes it
// for the request's: a ReserveStock with no order id travels with the
// credentials' key, two such orders with one body are one order (the
// second replayed the first's answer, the handler run once), and with
// another body the third is refused INVALID_ARGUMENT as another request
// under the key. This is why the README says never to put the header in
// credentials: the runtime cannot take it out.
func TestAttack27ACredentialsKeyMergesKeylessOrders(t *testing.T) {
	creds := headerCreds{runtime.IdempotencyKeyHeader: "callers-key"}
	r := newKeyRig(t, server.Healthy, nil, []grpc.DialOption{grpc.WithPerRPCCredentials(creds)}, longTimeouts)
	before := r.srv.Calls(reserveStock)
	same := &inventoryv1.ReserveStockRequest{Sku: "apple", Units: 1}
	var errs []error
	for range 2 {
		_, err := r.client.ReserveStock(ctx5s(t), same)
		errs = append(errs, err)
	}
	other := &inventoryv1.ReserveStockRequest{Sku: "pear", Units: 2}
	_, err := r.client.ReserveStock(ctx5s(t), other)
	errs = append(errs, err)
	runs := r.srv.Calls(reserveStock) - before
	s := r.stats()
	if runs != 1 || errs[0] != nil || errs[1] != nil || status.Code(errs[2]) != codes.InvalidArgument || s.Mismatched != 1 {
		t.Errorf("README (Generated idempotency keys): behind credentials carrying %s, three keyless orders are one key's: "+
			"want 1 run, the second replayed, the third refused INVALID_ARGUMENT; got %d runs "+
			"(Guard: %d replayed, %d mismatched, %d keys in Redis), errors %v",
			runtime.IdempotencyKeyHeader, runs, s.Replayed, s.Mismatched, r.keys(), errs)
	}
}

// TestAttack27AServerHeaderOtherThanTheClientsStillDeduplicates: the
// Guard's Dedup.Header may name another header ("A method may read its
// key from another header (policy.Dedup.Header, in Go)"), while the
// generated client sends its key as idempotency-key only, and retries
// ReserveStock because it is keyed. A reply lost after the handler ran
// makes the client retry: with the default header the retry is replayed
// (one run); with Dedup.Header "x-idempotency-key", the request carries
// no x-idempotency-key and is read by idempotency-key: one run too
// (before, the Guard saw no key and ran the order again).
func TestAttack27AServerHeaderOtherThanTheClientsStillDeduplicates(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"", 1},
		{"x-idempotency-key", 1},
	} {
		t.Run("header="+tc.header, func(t *testing.T) {
			edit := serverMethod(func(m *policy.ServerMethod) { m.Dedup.Header = tc.header })
			r := newKeyRig(t, server.Healthy, []rserver.Option{edit}, nil, longTimeouts)
			before := r.srv.Calls(reserveStock)
			r.proxy.LoseNextReply()
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-27a-hdr", Sku: "apple", Units: 1}
			resp, err := r.client.ReserveStock(ctx5s(t), req)
			if err != nil || resp.GetReservationId() != "r-"+req.OrderId {
				t.Fatalf("ReserveStock across a lost reply: %v, %v; want its answer", resp, err)
			}
			runs := r.srv.Calls(reserveStock) - before
			if runs != tc.want {
				t.Errorf("Dedup.Header %q: the handler ran %d times for one order retried after a lost reply, want %d (keys seen %v)",
					tc.header, runs, tc.want, r.srv.Keys(reserveStock))
			}
			s := r.stats()
			t.Logf("Dedup.Header %q: %d runs, Guard stats replayed=%d store errors=%d, %d keys in Redis", tc.header, runs, s.Replayed, s.StoreErrors, r.keys())
		})
	}
}

// TestAttack27AManyKeyValuesOnRedis: "a request that sends the header
// more than once, whatever the values, [is refused INVALID_ARGUMENT] and
// its handler does not run". Sent 5000 times (a caller that appends its
// key in a loop, 80 KiB of headers, inside gRPC's 16 MiB header limit),
// with values all empty, all one key, and all different, the refusal is
// INVALID_ARGUMENT with a short message, nothing is written to Redis,
// nothing stays in flight, and the same key sent once afterwards runs
// once and is replayed.
func TestAttack27AManyKeyValuesOnRedis(t *testing.T) {
	r := newKeyRig(t, server.Healthy, nil, nil)
	plain := inventoryv1.NewInventoryServiceClient(r.cc)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-27a-many", Sku: "apple", Units: 1}
	before := r.srv.Calls(reserveStock)
	for _, tc := range []struct {
		name  string
		value func(i int) string
	}{
		{"empty", func(int) string { return "" }},
		{"one key", func(int) string { return "k-many" }},
		{"all different", func(i int) string { return "k-" + strings.Repeat("x", i%200) }},
	} {
		kv := make([]string, 0, 2*5000)
		for i := range 5000 {
			kv = append(kv, runtime.IdempotencyKeyHeader, tc.value(i))
		}
		ctx := metadata.AppendToOutgoingContext(ctx5s(t), kv...)
		_, err := plain.ReserveStock(ctx, req)
		if status.Code(err) != codes.InvalidArgument || len(status.Convert(err).Message()) > 400 {
			t.Errorf("%s: 5000 values: %.300v; want a short INVALID_ARGUMENT", tc.name, err)
		}
	}
	if n := r.srv.Calls(reserveStock) - before; n != 0 {
		t.Errorf("the handler ran %d times for requests with 5000 key values, want 0", n)
	}
	if n := r.keys(); n != 0 {
		t.Errorf("Redis holds %d keys after refused requests, want 0", n)
	}
	for range 2 {
		ctx := metadata.AppendToOutgoingContext(ctx5s(t), runtime.IdempotencyKeyHeader, "k-many")
		if _, err := plain.ReserveStock(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.srv.Calls(reserveStock) - before; n != 1 {
		t.Errorf("the key sent once, twice: the handler ran %d times, want 1", n)
	}
	waitFor(t, "nothing in flight", func() bool { return r.stats().InFlight == 0 })
}

// forwardIncoming is the usual "propagate the headers" client
// interceptor, installed on the connection (grpc.WithChainUnaryInterceptor),
// so beneath the resilient client: it copies the metadata of the request
// being served (the context's incoming metadata) into the call's
// outgoing metadata.
func forwardIncoming(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if in, ok := metadata.FromIncomingContext(ctx); ok {
		out, _ := metadata.FromOutgoingContext(ctx)
		ctx = metadata.NewOutgoingContext(ctx, metadata.Join(out, in))
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// TestAttack27AForwardingInterceptorBeneathTheClient: README, "Generated
// idempotency keys": a key "the caller's context already carries in its
// outgoing metadata, as a service that forwards its incoming metadata to
// the services it calls does, is not sent. The call sends the request's
// key alone, or, without a key value, no header at all". A service that
// forwards its incoming metadata with an interceptor on the connection
// (the usual middleware, beneath the resilient client) forwards it after
// the runtime dropped the context's copy: a handler serving a request
// that came with idempotency-key "upstream-7" places two orders,
// ReserveStock o-1 and o-2, through the generated client. Each carries
// the upstream key beside its own, and the Guard refuses both
// INVALID_ARGUMENT, never running them; two keyless orders carry the
// upstream key alone and are one order to the Guard (the second body
// refused as another request's).
func TestAttack27AForwardingInterceptorBeneathTheClient(t *testing.T) {
	r := newKeyRig(t, server.Healthy, nil, []grpc.DialOption{grpc.WithChainUnaryInterceptor(forwardIncoming)}, longTimeouts)
	serving := func() context.Context { // the context of a handler serving a keyed request
		return metadata.NewIncomingContext(ctx5s(t), metadata.Pairs(runtime.IdempotencyKeyHeader, "upstream-7", "x-tenant", "t-1"))
	}
	before := r.srv.Calls(reserveStock)
	var keyed []error
	for _, order := range []string{"o-27a-f1", "o-27a-f2"} {
		_, err := r.client.ReserveStock(serving(), &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "apple", Units: 1})
		keyed = append(keyed, err)
	}
	keyedRuns := r.srv.Calls(reserveStock) - before
	var keyless []error
	for _, units := range []int64{1, 2} {
		_, err := r.client.ReserveStock(serving(), &inventoryv1.ReserveStockRequest{Sku: "apple", Units: units})
		keyless = append(keyless, err)
	}
	keylessRuns := r.srv.Calls(reserveStock) - before - keyedRuns
	if keyedRuns != 2 || keyed[0] != nil || keyed[1] != nil {
		t.Errorf("README (Generated idempotency keys): \"the call sends the request's key alone\"; two keyed orders placed from a handler "+
			"whose connection forwards its incoming metadata ran %d times (want 2), errors %v: the upstream key travelled beside each order's",
			keyedRuns, keyed)
	}
	if keylessRuns != 2 || keyless[0] != nil || keyless[1] != nil {
		s := r.stats()
		t.Errorf("README (Generated idempotency keys): a call without a key value sends \"no header at all\"; two keyless orders placed "+
			"from that handler ran %d times (want 2), errors %v (Guard: %d mismatched): both carried the upstream key",
			keylessRuns, keyless, s.Mismatched)
	}
}
