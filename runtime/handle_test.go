package runtime_test

import (
	"context"
	"errors"
	"io"
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
)

const stockReport = inventoryv1.InventoryService_StockReport_FullMethodName

// inventoryPolicy is a policy of the example inventory service with
// GetStock (retried, cached, low priority), ReserveStock (keyed) and
// WatchStock (one stream at a time).
func inventoryPolicy() policy.Service {
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	return policy.Service{
		Name: "example.inventory.v1.InventoryService",
		Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Retry: retry, Priority: policy.PriorityLow, Timeout: time.Second,
				Cache: &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"sku"}}},
			{Name: reserveStock, IdempotencyKey: "order_id", Retry: retry},
			{Name: watchStock, Kind: policy.KindServerStreaming, Bulkhead: &policy.Bulkhead{Permits: 1}},
		},
	}
}

// handles builds the runtime client of p and the handles of its methods,
// bound as generated code binds them, on cc.
type handles struct {
	rt           *runtime.Client
	getStock     *runtime.UnaryHandle[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]
	reserveStock *runtime.UnaryHandle[inventoryv1.ReserveStockRequest, inventoryv1.ReserveStockResponse]
	watchStock   *runtime.ServerStreamHandle[inventoryv1.WatchStockRequest, inventoryv1.WatchStockResponse]
}

func bindInventory(t *testing.T, p policy.Service, cc grpc.ClientConnInterface,
	fallback func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error),
) *handles {
	t.Helper()
	rt, err := runtime.NewClient(&p)
	if err != nil {
		t.Fatal(err)
	}
	inner := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	h := &handles{rt: rt}
	if h.getStock, err = runtime.NewUnary(rt, getStock, inner.GetStock,
		runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{
			CacheKey: func(in *inventoryv1.GetStockRequest) string { return in.GetSku() },
			Fallback: fallback,
		}); err != nil {
		t.Fatal(err)
	}
	if h.reserveStock, err = runtime.NewUnary(rt, reserveStock, inner.ReserveStock,
		runtime.UnaryHooks[inventoryv1.ReserveStockRequest, inventoryv1.ReserveStockResponse]{
			IdempotencyKey: func(in *inventoryv1.ReserveStockRequest) string { return in.GetOrderId() },
		}); err != nil {
		t.Fatal(err)
	}
	if h.watchStock, err = runtime.NewServerStream(rt, watchStock, inner.WatchStock); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestUnaryHandleAppliesItsMethodsPolicy(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	h := bindInventory(t, inventoryPolicy(), cc, nil)
	ctx := context.Background()
	if _, err := h.reserveStock.Call(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-7"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("ReserveStock: %v, want UNAVAILABLE", err)
	}
	if keys := srv.Keys(reserveStock); strings.Join(keys, ",") != "o-7,o-7,o-7" {
		t.Errorf("ReserveStock sent keys %q, want o-7 on each of 3 attempts", keys)
	}
	// A key that has no value is no key: the call is not retried.
	if _, err := h.reserveStock.Call(ctx, &inventoryv1.ReserveStockRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("ReserveStock without order id: %v, want UNAVAILABLE", err)
	}
	if got := srv.Calls(reserveStock); got != 4 {
		t.Errorf("server saw %d ReserveStock calls, want 3 + 1", got)
	}

	// GetStock goes through its cache: an answer is reused.
	srv.SetBehaviour(server.Healthy)
	for range 3 {
		if _, err := h.getStock.Call(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d GetStock calls for three of the same sku, want 1 (cached)", got)
	}
}

// The handle sends its method's priority, the one of the policy in force.
func TestUnaryHandleSendsItsPriority(t *testing.T) {
	_, cc := start(t, server.Healthy)
	p := inventoryPolicy()
	p.Methods[0].Cache = nil
	rt, err := runtime.NewClient(&p)
	if err != nil {
		t.Fatal(err)
	}
	plain := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	var sent []string
	spy := func(ctx context.Context, in *inventoryv1.GetStockRequest, opts ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
		md, _ := metadata.FromOutgoingContext(ctx)
		sent = md.Get(runtime.PriorityHeader)
		return plain.GetStock(ctx, in, opts...)
	}
	h, err := runtime.NewUnary(rt, getStock, spy, runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Call(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || sent[0] != "low" {
		t.Errorf("priority header sent = %q, want [low]", sent)
	}
}

func TestUnaryHandleFallsBack(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	var got error
	h := bindInventory(t, inventoryPolicy(), cc, func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
		got = err
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	})
	resp, err := h.getStock.Call(context.Background(), &inventoryv1.GetStockRequest{Sku: "pear"})
	if err != nil || resp.GetUnits() != -1 {
		t.Fatalf("GetStock = %v, %v; want the fallback's answer", resp, err)
	}
	if status.Code(got) != codes.Unavailable || srv.Calls(getStock) != 3 {
		t.Errorf("the fallback saw %v after %d attempts, want UNAVAILABLE after 3", got, srv.Calls(getStock))
	}
}

// A nil context or request is refused before anything is sent, by every
// kind of handle, and a handle never built refuses instead of panicking.
func TestHandlesRefuseMisuse(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	h := bindInventory(t, inventoryPolicy(), cc, nil)
	var nilCtx context.Context
	checks := []struct {
		name string
		err  error
		want codes.Code
	}{}
	add := func(name string, want codes.Code, err error) {
		checks = append(checks, struct {
			name string
			err  error
			want codes.Code
		}{name, err, want})
	}
	_, err := h.getStock.Call(nilCtx, &inventoryv1.GetStockRequest{})
	add("unary, nil context", codes.InvalidArgument, err)
	_, err = h.getStock.Call(context.Background(), nil)
	add("unary, nil request", codes.InvalidArgument, err)
	_, err = h.watchStock.Call(nilCtx, &inventoryv1.WatchStockRequest{})
	add("server stream, nil context", codes.InvalidArgument, err)
	_, err = h.watchStock.Call(context.Background(), nil)
	add("server stream, nil request", codes.InvalidArgument, err)
	var none *runtime.UnaryHandle[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]
	_, err = none.Call(context.Background(), &inventoryv1.GetStockRequest{})
	add("unary, never built", codes.FailedPrecondition, err)
	_, err = new(runtime.UnaryHandle[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]).Call(
		context.Background(), &inventoryv1.GetStockRequest{})
	add("unary, zero value", codes.FailedPrecondition, err)
	_, err = new(runtime.ServerStreamHandle[inventoryv1.WatchStockRequest, inventoryv1.WatchStockResponse]).Call(
		context.Background(), &inventoryv1.WatchStockRequest{})
	add("server stream, zero value", codes.FailedPrecondition, err)
	_, err = new(runtime.StreamHandle[grpc.ClientStream]).Call(context.Background())
	add("stream, zero value", codes.FailedPrecondition, err)
	var noStream *runtime.StreamHandle[grpc.ClientStream]
	_, err = noStream.Call(context.Background())
	add("stream, never built", codes.FailedPrecondition, err)
	// The zero value of a generated client.
	var zero inventoryv1.InventoryServiceResilientClient
	_, err = zero.GetStock(context.Background(), &inventoryv1.GetStockRequest{})
	add("zero generated client", codes.FailedPrecondition, err)
	for _, c := range checks {
		if status.Code(c.err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if n := srv.Calls(getStock) + srv.Calls(watchStock); n != 0 {
		t.Errorf("the server saw %d calls", n)
	}
}

// A stream opened through its handle holds its method's bulkhead, found by
// name, until it ends.
func TestServerStreamHandleHoldsItsBulkhead(t *testing.T) {
	_, cc := start(t, server.Healthy)
	h := bindInventory(t, inventoryPolicy(), cc, nil)
	ctx := context.Background()
	first, err := h.watchStock.Call(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.watchStock.Call(ctx, &inventoryv1.WatchStockRequest{Sku: "b"}); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("second stream while the first is open: %v, want bulkhead full", err)
	}
	for {
		if _, err := first.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := h.rt.BulkheadInUse(watchStock); n != 0 {
		t.Errorf("%d permits in use after the stream ended, want 0", n)
	}
	second, err := h.watchStock.Call(ctx, &inventoryv1.WatchStockRequest{Sku: "b"})
	if err != nil {
		t.Fatalf("after the first stream ended: %v", err)
	}
	if _, err := second.Recv(); err != nil {
		t.Fatal(err)
	}
}

// Binding refuses, naming the method, what would run a method under a
// policy that is not its own or drop one of its keys.
func TestBindingRefusals(t *testing.T) {
	_, cc := start(t, server.Healthy)
	p := inventoryPolicy()
	rt, err := runtime.NewClient(&p)
	if err != nil {
		t.Fatal(err)
	}
	inner := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	type getHooks = runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]
	type reserveHooks = runtime.UnaryHooks[inventoryv1.ReserveStockRequest, inventoryv1.ReserveStockResponse]
	cacheKey := func(in *inventoryv1.GetStockRequest) string { return in.GetSku() }
	errOf := func(_ any, err error) error { return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no such method", errOf(runtime.NewUnary(rt, stockReport, inner.StockReport,
			runtime.UnaryHooks[inventoryv1.StockReportRequest, inventoryv1.StockReportResponse]{})),
			"has no entry for method " + stockReport},
		{"unary handle on a stream", errOf(runtime.NewUnary(rt, watchStock, inner.GetStock, getHooks{CacheKey: cacheKey})),
			"method " + watchStock + " is unary, but its policy says server-streaming"},
		{"server-stream handle on a unary method", errOf(runtime.NewServerStream(rt, getStock, inner.WatchStock)),
			"method " + getStock + " is server-streaming, but its policy says unary"},
		{"stream handle on a server stream", errOf(runtime.NewStream(rt, watchStock,
			func(context.Context, ...grpc.CallOption) (grpc.ClientStream, error) { return nil, nil })),
			"method " + watchStock + " is client-streaming or bidirectional, but its policy says server-streaming"},
		{"cache without a key", errOf(runtime.NewUnary(rt, getStock, inner.GetStock, getHooks{})),
			"method " + getStock + ": a Cache, but the generated client makes no cache key"},
		{"idempotency key not read", errOf(runtime.NewUnary(rt, reserveStock, inner.ReserveStock, reserveHooks{})),
			"method " + reserveStock + `: IdempotencyKey "order_id", but the generated client reads no key`},
		{"nil call", errOf(runtime.NewUnary[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse](rt, getStock, nil,
			getHooks{CacheKey: cacheKey})), getStock + ": nil call"},
		{"nil client", errOf(runtime.NewUnary(nil, getStock, inner.GetStock, getHooks{CacheKey: cacheKey})),
			"binding " + getStock + ": nil Client"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", tc.name, tc.err, tc.want)
		}
	}
}

// A key the policy in force no longer asks for is not sent, and a cache it
// removed is not used: the handle follows the policy, not the annotation.
func TestUnaryHandleFollowsThePolicyInForce(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	p := inventoryPolicy()
	p.Methods[0].Cache = nil
	p.Methods[1].IdempotencyKey = ""
	p.Methods[1].Idempotent = true
	h := bindInventory(t, p, cc, nil)
	ctx := context.Background()
	for range 2 {
		if _, err := h.getStock.Call(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.reserveStock.Call(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d GetStock calls, want 2: the policy has no cache", got)
	}
	if keys := srv.Keys(reserveStock); len(keys) != 0 {
		t.Errorf("ReserveStock sent keys %q, want none: the policy names no key", keys)
	}
}

// A client-streaming or bidirectional handle opens its stream through the
// wrapped connection, which finds the method's bulkhead by name, and sends
// the method's priority. (The example services have no such method: the
// test opens WatchStock as a generic stream, its policy saying bidi.)
func TestStreamHandleOpensUnderItsPolicy(t *testing.T) {
	_, cc := start(t, server.Healthy)
	p := inventoryPolicy()
	p.Methods[2].Kind = policy.KindBidiStreaming
	p.Methods[2].Priority = policy.PriorityHigh
	rt, err := runtime.NewClient(&p)
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	desc := &grpc.StreamDesc{StreamName: "WatchStock", ServerStreams: true, ClientStreams: true}
	var sent []string
	h, err := runtime.NewStream(rt, watchStock, func(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		md, _ := metadata.FromOutgoingContext(ctx)
		sent = md.Get(runtime.PriorityHeader)
		return conn.NewStream(ctx, desc, watchStock, opts...)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := h.Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || sent[0] != "high" {
		t.Errorf("priority header sent = %q, want [high]", sent)
	}
	if _, err := h.Call(ctx); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("second stream while the first is open: %v, want bulkhead full", err)
	}
	if err := first.SendMsg(&inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := first.CloseSend(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		err := first.RecvMsg(new(inventoryv1.WatchStockResponse))
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Errorf("received %d messages, want the server's 3", n)
	}
	if inUse, _ := rt.BulkheadInUse(watchStock); inUse != 0 {
		t.Errorf("%d permits in use after the stream ended, want 0", inUse)
	}
	var nilCtx context.Context
	if _, err := h.Call(nilCtx); status.Code(err) != codes.InvalidArgument {
		t.Errorf("nil context: %v, want INVALID_ARGUMENT", err)
	}
}
