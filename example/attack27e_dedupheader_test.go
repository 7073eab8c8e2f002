package example_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// orderKeyHeader is the header ReserveStock's server policy reads its key
// from in these tests (policy.Dedup.Header).
const orderKeyHeader = "x-order-key"

func orderKeyRig(t *testing.T) *keyRig {
	t.Helper()
	edit := serverMethod(func(m *policy.ServerMethod) { m.Dedup.Header = orderKeyHeader })
	return newKeyRig(t, server.Healthy, []rserver.Option{edit}, nil, longTimeouts)
}

// TestAttack27EEmptyOtherHeaderBesideTheClientsKey: README, Server side,
// dedup: "A method may read its key from another header … a request that
// does not carry it is read by idempotency-key, the one the generated
// clients send, so that their retries of a keyed method are deduplicated
// all the same and never run once per attempt", and "A request without
// the key, or with an empty one, is not deduplicated". A caller whose
// middleware stamps x-order-key from a context value that is empty for
// this call (metadata.AppendToOutgoingContext(ctx, "x-order-key", "")),
// through the generated client, sends x-order-key "" and the order's own
// idempotency-key. An empty x-order-key is no key; the request carries
// its key in idempotency-key. One order, its reply lost, retried by the
// client: it must run once.
func TestAttack27EEmptyOtherHeaderBesideTheClientsKey(t *testing.T) {
	r := orderKeyRig(t)
	before := r.srv.Calls(reserveStock)
	r.proxy.LoseNextReply()
	ctx := metadata.AppendToOutgoingContext(ctx5s(t), orderKeyHeader, "")
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-27e-empty", Sku: "apple", Units: 1}
	resp, err := r.client.ReserveStock(ctx, req)
	if err != nil || resp.GetReservationId() != "r-"+req.OrderId {
		t.Fatalf("ReserveStock across a lost reply: %v, %v; want its answer", resp, err)
	}
	runs := r.srv.Calls(reserveStock) - before
	// The same order again, as a caller's own repeat of the key: a repeat
	// within the TTL is replayed.
	if _, err := r.client.ReserveStock(ctx, req); err != nil {
		t.Fatalf("ReserveStock again: %v", err)
	}
	again := r.srv.Calls(reserveStock) - before - runs
	s := r.stats()
	if runs != 1 || again != 0 {
		t.Errorf("README (Server side, dedup): with Dedup.Header %q, a generated client's retry of one order is deduplicated by "+
			"idempotency-key and never runs once per attempt; with %s present but empty beside idempotency-key %q, "+
			"the order whose reply was lost ran %d times (want 1), and its repeat ran %d more (want 0): Guard replayed %d, "+
			"%d keys in Redis, keys the server saw %v",
			orderKeyHeader, orderKeyHeader, req.OrderId, runs, again, s.Replayed, r.keys(), r.srv.Keys(reserveStock))
	}
}

// TestAttack27EBothHeadersTheMethodsOwnDecides: a request carrying both
// headers, with different values, is keyed by the method's own header
// alone: one order retried after a lost reply runs once, and its repeat
// with x-order-key and another idempotency-key is replayed; another order (another body, another idempotency-key) under
// the same x-order-key is refused INVALID_ARGUMENT as another request's,
// counted Mismatched, never run, never merged into the first; the first
// order's body under a new x-order-key and the same idempotency-key runs
// (the idempotency-key is not read when x-order-key is there).
func TestAttack27EBothHeadersTheMethodsOwnDecides(t *testing.T) {
	r := orderKeyRig(t)
	before := r.srv.Calls(reserveStock)
	order := &inventoryv1.ReserveStockRequest{OrderId: "o-27e-both", Sku: "apple", Units: 1}
	r.proxy.LoseNextReply()
	if _, err := r.client.ReserveStock(metadata.AppendToOutgoingContext(ctx5s(t), orderKeyHeader, "A-27e"), order); err != nil {
		t.Fatalf("first order across a lost reply: %v", err)
	}
	// Its repeat, with another idempotency-key (a caller's second
	// attempt through another client) and the same x-order-key: replayed.
	repeat := metadata.AppendToOutgoingContext(ctx5s(t), orderKeyHeader, "A-27e", runtime.IdempotencyKeyHeader, "other-key")
	if _, err := inventoryv1.NewInventoryServiceClient(r.cc).ReserveStock(repeat, order); err != nil {
		t.Fatalf("the order's repeat: %v", err)
	}
	runs1 := r.srv.Calls(reserveStock) - before
	replayed := r.stats().Replayed
	other := &inventoryv1.ReserveStockRequest{OrderId: "o-27e-both-2", Sku: "apple", Units: 1}
	_, errOther := r.client.ReserveStock(metadata.AppendToOutgoingContext(ctx5s(t), orderKeyHeader, "A-27e"), other)
	runs2 := r.srv.Calls(reserveStock) - before
	_, errNew := r.client.ReserveStock(metadata.AppendToOutgoingContext(ctx5s(t), orderKeyHeader, "B-27e"), order)
	runs3 := r.srv.Calls(reserveStock) - before
	s := r.stats()
	if runs1 != 1 {
		t.Errorf("both headers: one order retried after a lost reply, and repeated under another idempotency-key, ran %d times, want 1 (Guard %+v)", runs1, s)
	}
	if replayed == 0 {
		t.Errorf("the order's repeat under the same %s was not replayed (Guard %+v)", orderKeyHeader, s)
	}
	if status.Code(errOther) != codes.InvalidArgument || runs2 != runs1 || s.Mismatched != 1 {
		t.Errorf("another order under the same %s: %v, %d runs more, Mismatched %d; want INVALID_ARGUMENT, none, 1",
			orderKeyHeader, errOther, runs2-runs1, s.Mismatched)
	}
	if errNew != nil || runs3 != runs2+1 {
		t.Errorf("the first body under a new %s: %v, %d runs more; want it run once (its own key)", orderKeyHeader, errNew, runs3-runs2)
	}
}

// TestAttack27EHeaderSentTwiceEitherWay: README, Server side, dedup: "So
// is a request that sends the header more than once, whatever the
// values, and its handler does not run". With Dedup.Header x-order-key,
// through the plain client: x-order-key twice (two keys, one key twice,
// two empty values) beside an idempotency-key, and idempotency-key twice
// with no x-order-key, are refused INVALID_ARGUMENT naming the header
// sent twice, never run, nothing written to Redis, nothing counted as
// replayed or mismatched. x-order-key once beside an idempotency-key sent
// twice is keyed by x-order-key: it runs once, its repeat replayed. An
// empty idempotency-key with no x-order-key is no key: it runs each time.
func TestAttack27EHeaderSentTwiceEitherWay(t *testing.T) {
	r := orderKeyRig(t)
	plain := inventoryv1.NewInventoryServiceClient(r.cc)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-27e-twice", Sku: "apple", Units: 1}
	const ik = runtime.IdempotencyKeyHeader
	before := r.srv.Calls(reserveStock)
	for _, tc := range []struct {
		name, header string
		kv           []string
	}{
		{"two x-order-keys", orderKeyHeader, []string{orderKeyHeader, "A", orderKeyHeader, "B", ik, "o-27e-twice"}},
		{"one x-order-key twice", orderKeyHeader, []string{orderKeyHeader, "A", orderKeyHeader, "A", ik, "o-27e-twice"}},
		{"two empty x-order-keys", orderKeyHeader, []string{orderKeyHeader, "", orderKeyHeader, "", ik, "o-27e-twice"}},
		{"idempotency-key twice, no x-order-key", ik, []string{ik, "up-1", ik, "o-27e-twice"}},
		{"idempotency-key empty and a key, no x-order-key", ik, []string{ik, "", ik, "o-27e-twice"}},
	} {
		_, err := plain.ReserveStock(metadata.AppendToOutgoingContext(ctx5s(t), tc.kv...), req)
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "header "+tc.header+" was sent more than once") {
			t.Errorf("%s: %v; want INVALID_ARGUMENT naming %s sent more than once", tc.name, err, tc.header)
		}
	}
	if n := r.srv.Calls(reserveStock) - before; n != 0 || r.keys() != 0 {
		t.Errorf("requests sending a key header twice: %d runs, %d keys in Redis; want none", n, r.keys())
	}
	if s := r.stats(); s.Replayed != 0 || s.Mismatched != 0 || s.Waited != 0 {
		t.Errorf("refused requests counted: replayed %d, mismatched %d, waited %d; want 0", s.Replayed, s.Mismatched, s.Waited)
	}
	for range 2 {
		ctx := metadata.AppendToOutgoingContext(ctx5s(t), orderKeyHeader, "A-once", ik, "up-1", ik, "o-27e-twice")
		if _, err := plain.ReserveStock(ctx, req); err != nil {
			t.Fatalf("x-order-key once beside two idempotency-keys: %v", err)
		}
	}
	if n, s := r.srv.Calls(reserveStock)-before, r.stats(); n != 1 || s.Replayed != 1 {
		t.Errorf("x-order-key once beside two idempotency-keys, sent twice: %d runs, replayed %d; want 1 and 1", n, s.Replayed)
	}
	for range 2 {
		if _, err := plain.ReserveStock(metadata.AppendToOutgoingContext(ctx5s(t), ik, ""), req); err != nil {
			t.Fatalf("an empty idempotency-key: %v", err)
		}
	}
	if n := r.srv.Calls(reserveStock) - before; n != 3 {
		t.Errorf("an empty idempotency-key, no x-order-key, sent twice: %d runs in all, want 1 + 2 (no key, not deduplicated)", n)
	}
}

// TestAttack27EOneKeyTwoHeadersIsOneOrder: the header the key came in is
// not part of the entry. A retry of one order whose first attempt carried
// its key in x-order-key and whose retry carries it in idempotency-key
// alone (a caller moving from its own middleware to the generated client
// mid-rollout, or a proxy that drops unknown headers on one path) is one
// order: one run, the retry replayed.
func TestAttack27EOneKeyTwoHeadersIsOneOrder(t *testing.T) {
	r := orderKeyRig(t)
	plain := inventoryv1.NewInventoryServiceClient(r.cc)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-27e-moved", Sku: "apple", Units: 1}
	before := r.srv.Calls(reserveStock)
	if _, err := plain.ReserveStock(metadata.AppendToOutgoingContext(ctx5s(t), orderKeyHeader, req.OrderId), req); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.ReserveStock(context.WithoutCancel(ctx5s(t)), req); err != nil {
		t.Fatal(err)
	}
	if n, s := r.srv.Calls(reserveStock)-before, r.stats(); n != 1 || s.Replayed != 1 {
		t.Errorf("one key, first in %s then in idempotency-key: %d runs, replayed %d; want 1 and 1", orderKeyHeader, n, s.Replayed)
	}
}
