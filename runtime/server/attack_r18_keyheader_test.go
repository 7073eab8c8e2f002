package server

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18KeyHeaderSentTwice: a request whose idempotency-key header
// holds two values. A handler that forwards its incoming metadata to what
// it calls (a common "propagate the headers" middleware) sends its own
// caller's key first and the generated client's key after it
// (runtime.Call appends it); an Envoy route matching ".+" sees "a,b" (it
// joins the values with a comma) and retries it. Deduplicating on the
// first value alone would
//
//   - run every attempt of a request sent with ["", key] (the empty first
//     value is no key) although its client retries it because it has a
//     key: a charge applied twice;
//   - merge two orders that differ only in the key after the forwarded
//     one (two identical line items): the second is replayed the first's
//     answer, and never runs.
//
// So the Guard refuses a key header sent more than once, with
// INVALID_ARGUMENT naming the header, before anything is claimed; the
// handler never runs for them.
func TestAttackR18KeyHeaderSentTwice(t *testing.T) {
	srv := &inventoryServer{}
	store := NewMemoryStore(100)
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))
	h := runtime.IdempotencyKeyHeader
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1}
	send := func(values ...string) error {
		ctx := ctxTimeout(t, 2*time.Second)
		for _, v := range values {
			ctx = metadata.AppendToOutgoingContext(ctx, h, v)
		}
		_, err := client.ReserveStock(ctx, req)
		return err
	}

	cases := []struct {
		name   string
		values [][]string // the requests, in order
	}{
		{"an empty value then a key, sent as the client's retry does", [][]string{{"", "k-1"}, {"", "k-1"}}},
		{"a forwarded key then two orders' own keys", [][]string{{"up-1", "k-a"}, {"up-1", "k-b"}}},
		{"two empty values (Envoy sees \",\")", [][]string{{"", ""}, {"", ""}}},
		{"the same key twice", [][]string{{"k-2", "k-2"}}},
	}
	for _, c := range cases {
		before := srv.reserveCalls.Load()
		for i, vs := range c.values {
			err := send(vs...)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), h) || !strings.Contains(err.Error(), "more than once") {
				t.Errorf("%s: request %d (%q): %v, want INVALID_ARGUMENT naming the %s header sent more than once", c.name, i, vs, err, h)
			}
		}
		if n := srv.reserveCalls.Load() - before; n != 0 {
			t.Errorf("%s: the handler ran %d times, want 0: which value is the key is not the server's guess", c.name, n)
		}
	}
	if store.Len() != 0 {
		t.Errorf("the store holds %d entries, want none: nothing was claimed", store.Len())
	}
	if s := stats(t, g); s.Replayed != 0 || s.InFlight != 0 {
		t.Errorf("stats %+v: want no replay, nothing in flight", s)
	}

	// One value is still a key: run once, replayed after.
	for range 2 {
		if err := send("k-3"); err != nil {
			t.Fatal(err)
		}
	}
	if s := stats(t, g); s.Replayed != 1 {
		t.Errorf("one key sent twice: replayed %d, want 1", s.Replayed)
	}
}
