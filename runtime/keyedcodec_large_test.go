package runtime_test

import (
	"fmt"
	"testing"
	"time"

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
