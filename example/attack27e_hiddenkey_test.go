package example_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// seenIncoming is what one invocation of a connection's interceptor saw
// of its context's incoming metadata.
type seenIncoming struct {
	method string
	md     metadata.MD // FromIncomingContext
	key    []string    // ValueFromIncomingContext(idempotency-key)
	outKey []string    // what the call's outgoing metadata carried as idempotency-key
}

// incomingRecorder is a connection interceptor (unary and stream) that
// records, for every invocation (every attempt and hedged copy), what its
// context's incoming metadata holds: a tracing or tenant-propagating
// middleware reads it there.
type incomingRecorder struct {
	mu   sync.Mutex
	seen []seenIncoming
}

func (r *incomingRecorder) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	out, _ := metadata.FromOutgoingContext(ctx)
	r.mu.Lock()
	r.seen = append(r.seen, seenIncoming{method: method, md: md,
		key:    metadata.ValueFromIncomingContext(ctx, runtime.IdempotencyKeyHeader),
		outKey: out.Get(runtime.IdempotencyKeyHeader)})
	r.mu.Unlock()
}

func (r *incomingRecorder) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.record(ctx, method)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *incomingRecorder) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	r.record(ctx, method)
	return streamer(ctx, desc, cc, method, opts...)
}

func (r *incomingRecorder) take() []seenIncoming {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen
	r.seen = nil
	return s
}

func (r *incomingRecorder) dial() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(r.unary), grpc.WithChainStreamInterceptor(r.stream)}
}

// incomingShapes are incoming metadata a handler's context may carry, built
// by hand as a test or a framework does (metadata.MD is a map: its keys are
// not always lower case): a mixed-case key with several values, an empty
// value, two spellings of the key side by side. Beside the key, the
// headers an interceptor reads: tracing, tenant, a header of several values.
func incomingShapes() map[string]metadata.MD {
	others := func(md metadata.MD) metadata.MD {
		md["traceparent"] = []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
		md["X-Tenant"] = []string{"t-27e"} // mixed case: read with ValueFromIncomingContext or Get
		md["x-multi"] = []string{"a", "b", ""}
		return md
	}
	return map[string]metadata.MD{
		"mixed case, two values": others(metadata.MD{"Idempotency-Key": {"up-1", "up-2"}}),
		"empty value":            others(metadata.MD{"idempotency-key": {""}}),
		"no value at all":        others(metadata.MD{"idempotency-key": {}}),
		"two spellings":          others(metadata.MD{"IDEMPOTENCY-KEY": {"up-3"}, "idempotency-key": {"up-4"}}),
	}
}

// othersIntact reports what is wrong with the headers other than the key
// that an interceptor saw.
func othersIntact(s seenIncoming) string {
	want := map[string][]string{
		"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"x-tenant":    {"t-27e"},
		"x-multi":     {"a", "b", ""},
	}
	for k, v := range want {
		if got := s.md.Get(k); !slices.Equal(got, v) {
			return k + ": " + fmtVals(got) + ", want " + fmtVals(v)
		}
	}
	return ""
}

func fmtVals(v []string) string {
	if v == nil {
		return "absent"
	}
	return "[" + joinQ(v) + "]"
}

func joinQ(v []string) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += "\"" + x + "\""
	}
	return s
}

// TestAttack27EHiddenKeyLeavesTheRestOfTheIncomingMetadata: README,
// "Generated idempotency keys": "on a call whose key is the runtime's,
// the call's context hides the caller's incoming idempotency-key from the
// interceptors (the handler's own context is unchanged)". For every shape
// of incoming metadata a handler may carry (a mixed-case key with several
// values, an empty value, an empty list, two spellings), ReserveStock's
// every attempt (a first one answered UNAVAILABLE makes two) sees no incoming key of any
// spelling, and every other incoming header (tracing, a mixed-case tenant
// header, one of several values) as the handler has it; the server gets
// the order's key alone on each; a keyless order sends no key.
// Unkeyed methods (StockReport; GetStock through its cache's shared
// call) and the stream WatchStock see the incoming key as it was. After
// all of it, the handler's context and its metadata map are what they
// were.
func TestAttack27EHiddenKeyLeavesTheRestOfTheIncomingMetadata(t *testing.T) {
	rec := &incomingRecorder{}
	var failed sync.Map // the first attempt of each keyed order fails UNAVAILABLE, and is retried
	failFirst := func(_ context.Context, c server.Call) error {
		if _, seen := failed.LoadOrStore(c.IdempotencyKey, true); c.Method == reserveStock && c.IdempotencyKey != "" && !seen {
			return status.Error(codes.Unavailable, "injected: first attempt")
		}
		return nil
	}
	r := newKeyRig(t, failFirst, nil, rec.dial(), longTimeouts)
	rec.take() // the warm-up
	n := 0
	for name, md := range incomingShapes() {
		n++
		t.Run(name, func(t *testing.T) {
			snapshot := metadata.MD{}
			for k, v := range md {
				snapshot[k] = slices.Clone(v)
			}
			handlerCtx := metadata.NewIncomingContext(ctx5s(t), md)
			wantKey := metadata.ValueFromIncomingContext(handlerCtx, runtime.IdempotencyKeyHeader)

			// A keyed order whose first attempt fails UNAVAILABLE: two attempts.
			order := &inventoryv1.ReserveStockRequest{OrderId: "o-27e-h" + string(rune('0'+n)), Sku: "apple", Units: 1}
			beforeRuns, beforeKeys := r.srv.Calls(reserveStock), len(r.srv.Keys(reserveStock))
			if _, err := r.client.ReserveStock(handlerCtx, order); err != nil {
				t.Fatalf("ReserveStock retried after UNAVAILABLE: %v", err)
			}
			attempts := rec.take()
			runs := r.srv.Calls(reserveStock) - beforeRuns
			keys := r.srv.Keys(reserveStock)[beforeKeys:]
			if len(attempts) != 2 || runs != 2 || len(keys) != 2 {
				t.Errorf("a keyed order retried once: %d attempts seen by the interceptor, %d reached the handler, %d with a key; want 2 each",
					len(attempts), runs, len(keys))
			}
			for i, s := range attempts {
				if s.key != nil || s.md.Get(runtime.IdempotencyKeyHeader) != nil {
					t.Errorf("README (Generated idempotency keys): a keyed call's context hides the caller's incoming key; attempt %d's interceptor saw %v / %v",
						i+1, s.key, s.md.Get(runtime.IdempotencyKeyHeader))
				}
				if why := othersIntact(s); why != "" {
					t.Errorf("attempt %d of a keyed call: the interceptor's incoming metadata lost another header: %s", i+1, why)
				}
				if !slices.Equal(s.outKey, []string{order.OrderId}) {
					t.Errorf("attempt %d sent idempotency-key %v, want the order's alone", i+1, s.outKey)
				}
			}
			for _, k := range keys {
				if k != order.OrderId {
					t.Errorf("the server saw key %q for order %s", k, order.OrderId)
				}
			}

			// A keyless order: no key at all.
			beforeKeys = len(r.srv.Keys(reserveStock))
			if _, err := r.client.ReserveStock(handlerCtx, &inventoryv1.ReserveStockRequest{Sku: "pear", Units: int64(n)}); err != nil {
				t.Fatalf("keyless ReserveStock: %v", err)
			}
			for _, s := range rec.take() {
				if s.key != nil || s.outKey != nil || othersIntact(s) != "" {
					t.Errorf("a keyless order of a keyed method: interceptor saw incoming key %v, outgoing %v, others: %q", s.key, s.outKey, othersIntact(s))
				}
			}
			if k := r.srv.Keys(reserveStock)[beforeKeys:]; len(k) != 0 {
				t.Errorf("a keyless order reached the server with keys %v", k)
			}

			// Unkeyed methods and the stream: the caller's metadata as it was.
			if _, err := r.client.StockReport(handlerCtx, &inventoryv1.StockReportRequest{Warehouse: "w-27e"}); err != nil {
				t.Fatalf("StockReport: %v", err)
			}
			if _, err := r.client.GetStock(handlerCtx, &inventoryv1.GetStockRequest{Sku: "sku-27e-" + name}); err != nil {
				t.Fatalf("GetStock: %v", err)
			}
			st, err := r.client.WatchStock(handlerCtx, &inventoryv1.WatchStockRequest{Sku: "s"})
			if err != nil {
				t.Fatalf("WatchStock: %v", err)
			}
			for {
				if _, err := st.Recv(); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("WatchStock Recv: %v", err)
					}
					break
				}
			}
			unkeyed := rec.take()
			if len(unkeyed) != 3 {
				t.Fatalf("unkeyed calls seen by the interceptor: %d, want 3", len(unkeyed))
			}
			for _, s := range unkeyed {
				if !slices.Equal(s.key, wantKey) {
					t.Errorf("%s (no key of the runtime's) must leave the incoming key as the caller has it: interceptor saw %v, want %v",
						s.method, s.key, wantKey)
				}
				if why := othersIntact(s); why != "" {
					t.Errorf("%s: %s", s.method, why)
				}
			}

			// The handler's own context and map, unchanged.
			if got := metadata.ValueFromIncomingContext(handlerCtx, runtime.IdempotencyKeyHeader); !slices.Equal(got, wantKey) {
				t.Errorf("after the calls, the handler's context reads idempotency-key %v, want %v", got, wantKey)
			}
			if !reflect.DeepEqual(map[string][]string(md), map[string][]string(snapshot)) {
				t.Errorf("after the calls, the handler's metadata map is %v, want %v", md, snapshot)
			}
		})
	}
}
