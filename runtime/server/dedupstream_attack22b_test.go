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
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// dedupStreamPolicy is the inventory's policy with a Dedup on WatchStock,
// a server-streaming method, whose Kind is left out as a hand-written
// policy may (zero is KindUnary, so Validate accepts it).
func dedupStreamPolicy() *policy.Server {
	p := inventoryPolicy()
	for i := range p.Methods {
		if p.Methods[i].Name == watchStock {
			p.Methods[i].Kind = 0 // left out: KindUnary
			p.Methods[i].Dedup = &policy.Dedup{TTL: time.Minute}
			p.Methods[i].NewResponse = func() proto.Message { return new(inventoryv1.WatchStockResponse) }
		}
	}
	return p
}

// TestAttack22bKeyedStreamOfADedupMethodIsNotRunUnguarded: a policy
// written by hand that gives a server-streaming method a Dedup and leaves
// its Kind out (zero is KindUnary, so Validate accepts it). The Guard
// cannot deduplicate a stream; it ran every keyed stream, so two streams
// sent with one key both ran the handler, and nothing said the dedup was
// not applied. A keyed stream of such a method is refused, naming the
// method and the mend; one without a key runs as any stream does.
func TestAttack22bKeyedStreamOfADedupMethodIsNotRunUnguarded(t *testing.T) {
	srv := &inventoryServer{}
	g, client, _ := guarded(t, srv, []*policy.Server{dedupStreamPolicy()})

	watch := func(key string) error {
		ctx := ctxTimeout(t, time.Second)
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, key)
		}
		st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	for attempt := range 2 {
		err := watch("k-1")
		if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "stream") ||
			!strings.Contains(status.Convert(err).Message(), watchStock) {
			t.Fatalf("keyed stream, attempt %d: %v; want INTERNAL naming %s and why a stream cannot be deduplicated", attempt+1, err, watchStock)
		}
	}
	if n := srv.watchCalls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for two streams with one key; want 0 (refused, never run unguarded)", n)
	}
	eventually(t, "the refused streams' places given back", func() bool { return stats(t, g).InFlight == 0 })
	if err := watch(""); err != nil {
		t.Fatalf("stream without a key: %v; want it served", err)
	}
	if n := srv.watchCalls.Load(); n != 1 {
		t.Fatalf("handler runs after a stream without a key: %d, want 1", n)
	}
}

// TestAttack22bDedupMethodThroughAProxysStreamHandler: a gateway serves
// every method with grpc.UnknownServiceHandler (a transparent proxy) and
// installs the Guard with the services' generated policies. gRPC hands
// every request, ReserveStock included, to the stream interceptor, which
// does not deduplicate: two requests with one key both reached the
// handler, silently. The keyed request is refused, so that the gateway's
// operator learns that the dedup the policy promises cannot be applied
// there.
func TestAttack22bDedupMethodThroughAProxysStreamHandler(t *testing.T) {
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
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
	for attempt := range 2 {
		ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, time.Second), runtime.IdempotencyKeyHeader, "order-7")
		_, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "order-7", Sku: "a", Units: 1})
		if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), reserveStock) {
			t.Fatalf("attempt %d: %v; want INTERNAL naming %s", attempt+1, err, reserveStock)
		}
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the proxy ran %d times for two requests with one key; want 0", n)
	}
	// GetStock, not deduplicated, passes through the proxy as before.
	if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); status.Code(err) == codes.Internal {
		t.Fatalf("GetStock through the proxy: %v; a method without dedup must not be refused", err)
	}
}
