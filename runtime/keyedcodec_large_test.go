package runtime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestKeyedCallOfALargeRequestSendsOneBody: a keyed request larger than
// gRPC's buffer-pooling threshold (1 KiB), which the runtime's codec
// writes into a pooled buffer, reaches the server as the same bytes on
// every attempt, and as the request: the server decodes the map whole.
func TestKeyedCallOfALargeRequestSendsOneBody(t *testing.T) {
	s := newKeyedSchema(t)
	w := serveWire(t, s)
	h := placeHandle(t, s, dialWire(t, w), policy.Method{IdempotencyKey: "order_id", Retry: keyedRetry(3)})
	req := dynamicpb.NewMessage(s.req)
	req.Set(s.req.Fields().ByNumber(1), protoreflect.ValueOfString("o-large"))
	tags := req.Mutable(s.req.Fields().ByNumber(4)).Map()
	for i := range 256 {
		tags.Set(protoreflect.ValueOfString(fmt.Sprintf("tag-%03d", i)).MapKey(), protoreflect.ValueOfString(fmt.Sprintf("value-%03d-of-the-order", i)))
	}
	w.fail.Store(2) // two attempts lost, the third answered
	resp, err := h.Call(ctxWithin(t, 5*time.Second), req)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if got := resp.Get(s.resp.Fields().ByNumber(1)).String(); got != "placed-o-large" {
		t.Fatalf("answer %q, want placed-o-large", got)
	}
	bodies, _ := w.seen()
	oneBody(t, bodies, 3)
	if len(bodies[0]) <= 1024 {
		t.Fatalf("the request was %d bytes, want more than the pooling threshold of 1024", len(bodies[0]))
	}
	got := dynamicpb.NewMessage(s.req)
	if err := proto.Unmarshal(bodies[0], got); err != nil {
		t.Fatalf("the body the server saw does not decode: %v", err)
	}
	if !proto.Equal(got, req) {
		t.Fatal("the body the server saw is not the request")
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(bodies[0]) {
		t.Fatal("the body is not the request's deterministic serialization")
	}
}

// TestKeyedRequestThatDoesNotMarshalIsNotRetried: a keyed request the
// runtime's codec cannot write (a proto3 string that is not UTF-8) fails
// on the client's side, INTERNAL as with gRPC's codec, and is not
// repeated: the server sees nothing.
func TestKeyedRequestThatDoesNotMarshalIsNotRetried(t *testing.T) {
	s := newKeyedSchema(t)
	w := serveWire(t, s)
	var attempts atomic.Int64
	count := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		attempts.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	h := placeHandle(t, s, dialWire(t, w, count), policy.Method{IdempotencyKey: "order_id", Retry: keyedRetry(3)})
	req := s.request("o-bad")
	req.Mutable(s.req.Fields().ByNumber(4)).Map().Set(protoreflect.ValueOfString("bad").MapKey(), protoreflect.ValueOfString("\xff\xfe"))
	_, err := h.Call(ctxWithin(t, 5*time.Second), req)
	if status.Code(err) != codes.Internal {
		t.Fatalf("call: %v, want INTERNAL", err)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1: a request that cannot be written is not repeated", n)
	}
	if bodies, _ := w.seen(); len(bodies) != 0 {
		t.Fatalf("the server saw %d requests, want none", len(bodies))
	}
}
