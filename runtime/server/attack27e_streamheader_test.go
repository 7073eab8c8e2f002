package server

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack27EKeyedStreamReadsEitherHeader: README, Server side, dedup:
// a request of a deduplicated method that reaches the Guard as a stream
// (a proxy serving every method with grpc.UnknownServiceHandler) "is
// refused with INTERNAL naming the method when it carries a key, its
// handler not run … one without a key runs", and a method whose
// Dedup.Header is another header reads idempotency-key when the request
// does not carry its own. ReserveStock with Dedup.Header x-order-key,
// through such a proxy: a key in x-order-key, in idempotency-key alone,
// or in idempotency-key beside an empty x-order-key (an empty key is no
// key, the request's key is in idempotency-key) is refused, the proxy not
// run; neither header, an empty x-order-key alone, or two empty ones,
// runs. Nothing panics; nothing is counted as replayed or mismatched.
func TestAttack27EKeyedStreamReadsEitherHeader(t *testing.T) {
	p := inventoryPolicy()
	for i := range p.Methods {
		if p.Methods[i].Name == reserveStock {
			p.Methods[i].Dedup.Header = "x-order-key"
		}
	}
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	proxy := func(_ any, st grpc.ServerStream) error {
		runs.Add(1)
		req := new(inventoryv1.ReserveStockRequest)
		if err := st.RecvMsg(req); err != nil {
			return err
		}
		return st.SendMsg(&inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()})
	}
	s := grpc.NewServer(append(g.ServerOptions(), grpc.UnknownServiceHandler(proxy))...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serveGRPC(t, s)))
	const ik = runtime.IdempotencyKeyHeader
	for _, tc := range []struct {
		name   string
		kv     []string
		refuse bool
	}{
		{"x-order-key", []string{"x-order-key", "A"}, true},
		{"idempotency-key alone", []string{ik, "k-1"}, true},
		{"idempotency-key beside an empty x-order-key", []string{"x-order-key", "", ik, "k-1"}, true},
		{"x-order-key beside idempotency-key", []string{"x-order-key", "A", ik, "k-1"}, true},
		{"neither", nil, false},
		{"an empty x-order-key alone", []string{"x-order-key", ""}, false},
		{"two empty x-order-keys", []string{"x-order-key", "", "x-order-key", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runs.Load()
			ctx := ctxTimeout(t, time.Second)
			if tc.kv != nil {
				ctx = metadata.AppendToOutgoingContext(ctx, tc.kv...)
			}
			_, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
			ran := runs.Load() - before
			if tc.refuse {
				if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), reserveStock) || ran != 0 {
					t.Errorf("a keyed request of a deduplicated method through a stream handler (%v): %v, %d runs; "+
						"want INTERNAL naming %s, never run unguarded", tc.kv, err, ran, reserveStock)
				}
				return
			}
			if err != nil || ran != 1 {
				t.Errorf("a request without a key through the stream handler (%v): %v, %d runs; want it run once", tc.kv, err, ran)
			}
		})
	}
	if st := stats(t, g); st.Replayed != 0 || st.Mismatched != 0 {
		t.Errorf("streams counted as replayed %d, mismatched %d; want 0", st.Replayed, st.Mismatched)
	}
}
