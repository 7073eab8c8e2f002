package runtime_test

// atkC's attacks of stop 21 on the client runtime: the forwarded
// idempotency-key in odd shapes, call options that hold a nil, a caller's
// codec given by pointer, and a panicking interceptor on a method without
// metrics (the unary path's panic guard).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack21cForwardedKeyInOddShapes: a forwarded idempotency-key that
// is not the plain one-value, lower-case pair (several values, an MD
// built by hand with its key in capitals beside the lower-case one, a
// pair appended with AppendToOutgoingContext in capitals, an empty value)
// is dropped for ReserveStock (keyed by order_id): the server sees the
// request's key alone. A -bin header of the same stem is another header
// and travels as set; StockReport (no key) keeps the forwarded values.
func TestAttack21cForwardedKeyInOddShapes(t *testing.T) {
	atkNoLeak(t)
	keys := &attack21aKeys{}
	var bins atomic.Int32
	binSeen := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if len(md.Get(runtime.IdempotencyKeyHeader+"-bin")) != 0 {
			bins.Add(1)
		}
		return h(ctx, req)
	})
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{keys.interceptor(), binSeen})
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)

	bg := context.Background()
	shapes := map[string]context.Context{
		"two values": metadata.NewOutgoingContext(bg, metadata.Pairs(runtime.IdempotencyKeyHeader, "up-1", runtime.IdempotencyKeyHeader, "up-2")),
		"hand-built MD, both casings": metadata.NewOutgoingContext(bg, metadata.MD{
			"Idempotency-Key": {"up-3"}, "idempotency-key": {"up-4"}, "IDEMPOTENCY-KEY": {"up-5"}}),
		"appended in capitals": metadata.AppendToOutgoingContext(
			metadata.AppendToOutgoingContext(bg, "Idempotency-Key", "up-6"), "IDEMPOTENCY-KEY", "up-7"),
		"empty value":     metadata.AppendToOutgoingContext(bg, runtime.IdempotencyKeyHeader, ""),
		"md and appended": metadata.AppendToOutgoingContext(metadata.NewOutgoingContext(bg, metadata.Pairs("idempotency-key", "up-8")), "Idempotency-Key", "up-9"),
	}
	n := 0
	for what, ctx := range shapes {
		n++
		order := "order-" + strings.ReplaceAll(what, " ", "-")
		if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "apple", Units: 1}); err != nil {
			t.Fatalf("%s: ReserveStock: %v", what, err)
		}
		got := keys.calls()
		if len(got) != n {
			t.Fatalf("%s: the server saw %d calls, want %d", what, len(got), n)
		}
		if !slices.Equal(got[n-1], []string{order}) {
			t.Errorf("%s: the server saw idempotency-key %q, want the request's [%q] alone", what, got[n-1], order)
		}
	}
	// A keyless call (order_id empty) from the two-value context sends none.
	if _, err := c.ReserveStock(shapes["two values"], &inventoryv1.ReserveStockRequest{Sku: "apple"}); err != nil {
		t.Fatalf("keyless ReserveStock: %v", err)
	}
	n++
	if got := keys.calls(); len(got) != n || len(got[n-1]) != 0 {
		t.Errorf("a keyless call from a forwarding context: the server saw %q, want no key", got[len(got)-1])
	}
	// The -bin header is another header: kept on both methods.
	binCtx := metadata.AppendToOutgoingContext(shapes["two values"], runtime.IdempotencyKeyHeader+"-bin", "\x01\x02")
	if _, err := c.ReserveStock(binCtx, &inventoryv1.ReserveStockRequest{OrderId: "order-bin"}); err != nil {
		t.Fatalf("ReserveStock with a -bin header: %v", err)
	}
	n++
	if got := keys.calls(); !slices.Equal(got[n-1], []string{"order-bin"}) {
		t.Errorf("with a -bin header beside the forwarded key: the server saw %q, want [order-bin]", got[n-1])
	}
	if bins.Load() != 1 {
		t.Errorf("the -bin header reached the server %d times, want 1 (it is not the runtime's)", bins.Load())
	}
	// StockReport sends no key of the runtime's: the forwarded values go as set.
	if _, err := c.StockReport(shapes["two values"], &inventoryv1.StockReportRequest{}); err != nil {
		t.Fatalf("StockReport: %v", err)
	}
	n++
	if got := keys.calls(); !slices.Equal(got[n-1], []string{"up-1", "up-2"}) {
		t.Errorf("StockReport from a forwarding context: the server saw %q, want the forwarded [up-1 up-2]", got[n-1])
	}
}

// attack21cCodec is a codec of the caller's: it counts its marshals.
type attack21cCodec struct{ n *atomic.Int32 }

func (c attack21cCodec) Marshal(v any) (mem.BufferSlice, error) {
	c.n.Add(1)
	return encoding.GetCodecV2(protocodec.Name).Marshal(v)
}
func (c attack21cCodec) Unmarshal(d mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(protocodec.Name).Unmarshal(d, v)
}
func (attack21cCodec) Name() string { return protocodec.Name }

// TestAttack21cCallersCodecByPointerIsKept: the README says a codec the
// caller passes to a keyed call is kept, the runtime adding none. A
// *grpc.ForceCodecV2CallOption (a pointer, which is a grpc.CallOption as
// the value is) is the caller's codec as much as the value: the request
// must be written by it.
func TestAttack21cCallersCodecByPointerIsKept(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
	var n atomic.Int32
	byValue := grpc.ForceCodecV2(attack21cCodec{&n})
	if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "v"}, byValue); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 {
		t.Fatalf("the caller's codec by value wrote %d requests, want 1", n.Load())
	}
	n.Store(0)
	byPointer := &grpc.ForceCodecV2CallOption{CodecV2: attack21cCodec{&n}}
	if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "p"}, byPointer); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 {
		t.Errorf("the caller's codec given by pointer wrote %d requests, want 1: the runtime's codec replaced it", n.Load())
	}
}

// TestAttack21cLargeKeyedRequestFromManyCallersIsOneBody: a keyed request
// far above gRPC's buffer-pooling threshold (a map of 2,000 tags, about
// 60 KB: the codec's pooled path), retried
// by eight callers at once (16 attempts lost among them) sharing the one request value, arrives as one
// body every time: a buffer given back to the pool by one attempt is not
// the bytes of another.
func TestAttack21cLargeKeyedRequestFromManyCallersIsOneBody(t *testing.T) {
	atkNoLeak(t)
	s := newKeyedSchema(t)
	w := serveWire(t, s)
	h := placeHandle(t, s, dialWire(t, w), policy.Method{IdempotencyKey: "order_id", Retry: keyedRetry(20)})
	req := s.request("o-big")
	tags := req.Mutable(s.req.Fields().ByNumber(4)).Map()
	for i := range 2000 {
		k := fmt.Sprintf("tag-%04d", i)
		tags.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(strings.Repeat("v", 20)+k))
	}
	if n := proto.Size(req); n < 50_000 {
		t.Fatalf("request of %d bytes, want one far above the pooling threshold", n)
	}
	// Connect first.
	if _, err := h.Call(ctxWithin(t, 5*time.Second), req); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	w.fail.Store(2 * 8)
	for range 8 {
		wg.Go(func() {
			if _, err := h.Call(ctxWithin(t, 10*time.Second), req); err != nil {
				t.Errorf("call: %v", err)
			}
		})
	}
	wg.Wait()
	// The 16 losses fall on the callers as they come: every caller
	// answered, 8 answers and 16 losses reached the server.
	bodies, _ := w.seen()
	oneBody(t, bodies, 1+8+16)
}
