package runtime_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The service of these tests: rkeyed.Orders/Place, whose PlaceRequest has
// an order_id (1), the key, and a map<string, string> tags (4).
const (
	keyedService = "rkeyed.Orders"
	keyedPlace   = "/rkeyed.Orders/Place"
)

// keyedSchema is the request and response of rkeyed.Orders/Place.
type keyedSchema struct {
	req, resp protoreflect.MessageDescriptor
}

func newKeyedSchema(t testing.TB) keyedSchema {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("rkeyed.proto"), Package: proto.String("rkeyed"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{
				Name: proto.String("PlaceRequest"),
				Field: []*descriptorpb.FieldDescriptorProto{
					{Name: proto.String("order_id"), Number: proto.Int32(1), Type: str, Label: opt},
					{Name: proto.String("tags"), Number: proto.Int32(4), Type: msg, Label: rep, TypeName: proto.String(".rkeyed.PlaceRequest.TagsEntry")},
				},
				NestedType: []*descriptorpb.DescriptorProto{{
					Name: proto.String("TagsEntry"),
					Field: []*descriptorpb.FieldDescriptorProto{
						{Name: proto.String("key"), Number: proto.Int32(1), Type: str, Label: opt},
						{Name: proto.String("value"), Number: proto.Int32(2), Type: str, Label: opt},
					},
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
				}},
			},
			{Name: proto.String("PlaceResponse"), Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("id"), Number: proto.Int32(1), Type: str, Label: opt}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return keyedSchema{fd.Messages().Get(0), fd.Messages().Get(1)}
}

// request returns a PlaceRequest of order id with sixteen tags: two
// marshals by gRPC's default codec almost never write them in one order.
func (s keyedSchema) request(id string) *dynamicpb.Message {
	req := dynamicpb.NewMessage(s.req)
	req.Set(s.req.Fields().ByNumber(1), protoreflect.ValueOfString(id))
	tags := req.Mutable(s.req.Fields().ByNumber(4)).Map()
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"} {
		tags.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString("v-"+k))
	}
	return req
}

// wireServer serves rkeyed.Orders/Place on loopback and records each
// request as it arrived: its bytes on the wire and its content-type.
type wireServer struct {
	addr string
	fail atomic.Int64 // the next fail requests are answered UNAVAILABLE
	wait time.Duration

	mu     sync.Mutex
	bodies [][]byte
	types  []string
}

func (w *wireServer) seen() ([][]byte, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.bodies...), append([]string(nil), w.types...)
}

// recordingCodec is the server's codec: gRPC's, recording the bytes of
// each request before decoding it.
type recordingCodec struct{ w *wireServer }

func (c recordingCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(protocodec.Name).Marshal(v)
}

func (c recordingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.w.mu.Lock()
	c.w.bodies = append(c.w.bodies, data.Materialize())
	c.w.mu.Unlock()
	return encoding.GetCodecV2(protocodec.Name).Unmarshal(data, v)
}

func (recordingCodec) Name() string { return protocodec.Name }

func serveWire(t testing.TB, s keyedSchema) *wireServer {
	t.Helper()
	w := &wireServer{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = lis.Addr().String()
	var runs atomic.Int64
	srv := grpc.NewServer(grpc.ForceServerCodecV2(recordingCodec{w}))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: keyedService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Place", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			req := dynamicpb.NewMessage(s.req)
			if err := dec(req); err != nil {
				return nil, err
			}
			md, _ := metadata.FromIncomingContext(ctx)
			w.mu.Lock()
			w.types = append(w.types, md.Get("content-type")...)
			w.mu.Unlock()
			if w.fail.Add(-1) >= 0 {
				return nil, status.Error(codes.Unavailable, "the answer was lost")
			}
			if w.wait > 0 {
				select {
				case <-time.After(w.wait):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			resp := dynamicpb.NewMessage(s.resp)
			resp.Set(s.resp.Fields().ByNumber(1), protoreflect.ValueOfString("placed-"+req.Get(s.req.Fields().ByNumber(1)).String()))
			runs.Add(1)
			return resp, nil
		}}},
	}, struct{}{})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return w
}

func dialWire(t testing.TB, w *wireServer, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(w.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// placeHandle binds Place under m, as generated code does: the plain
// client's method on the runtime's Conn, the key read from order_id when
// m names it.
func placeHandle(t testing.TB, s keyedSchema, cc grpc.ClientConnInterface, m policy.Method) *runtime.UnaryHandle[dynamicpb.Message, dynamicpb.Message] {
	t.Helper()
	m.Name, m.Kind = keyedPlace, policy.KindUnary
	rt, err := runtime.NewClient(&policy.Service{Name: keyedService,
		Budget:  &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute},
		Methods: []policy.Method{m}})
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	call := func(ctx context.Context, in *dynamicpb.Message, opts ...grpc.CallOption) (*dynamicpb.Message, error) {
		out := dynamicpb.NewMessage(s.resp)
		if err := conn.Invoke(ctx, keyedPlace, in, out, opts...); err != nil {
			return nil, err
		}
		return out, nil
	}
	var hooks runtime.UnaryHooks[dynamicpb.Message, dynamicpb.Message]
	if m.IdempotencyKey != "" {
		hooks.IdempotencyKey = func(in *dynamicpb.Message) string { return in.Get(s.req.Fields().ByNumber(1)).String() }
	}
	h, err := runtime.NewUnary(rt, keyedPlace, call, hooks)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ctxWithin is a context that ends after d or with the test.
func ctxWithin(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func keyedRetry(attempts int) *policy.Retry {
	return &policy.Retry{MaxAttempts: attempts, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
}

// oneBody fails unless every body is the first, and there are want of them.
func oneBody(t *testing.T, bodies [][]byte, want int) {
	t.Helper()
	if len(bodies) != want {
		t.Fatalf("the server saw %d requests, want %d", len(bodies), want)
	}
	for i, b := range bodies {
		if !bytes.Equal(b, bodies[0]) {
			t.Fatalf("request %d of one call arrived as %x, the first as %x: one request, two bodies", i+1, b, bodies[0])
		}
	}
}

// TestKeyedCallSendsOneBody: every attempt of a call that sends an
// idempotency key, read from the request or generated, and every call of
// the same request, reaches the server as the same bytes, though the
// request holds a map (which gRPC's codec writes in another order at each
// marshal); and as protobuf, content-type application/grpc+proto.
func TestKeyedCallSendsOneBody(t *testing.T) {
	s := newKeyedSchema(t)
	for _, tc := range []struct {
		name string
		m    policy.Method
	}{
		{"a key field", policy.Method{IdempotencyKey: "order_id", Retry: keyedRetry(3)}},
		{"a generated key", policy.Method{GenerateIdempotencyKey: true, Retry: keyedRetry(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serveWire(t, s)
			h := placeHandle(t, s, dialWire(t, w), tc.m)
			req := s.request("o-1")
			const calls = 4
			for range calls {
				w.fail.Store(2) // two attempts lost, the third answered
				resp, err := h.Call(ctxWithin(t, 5*time.Second), req)
				if err != nil {
					t.Fatalf("call: %v", err)
				}
				if got := resp.Get(s.resp.Fields().ByNumber(1)).String(); got != "placed-o-1" {
					t.Fatalf("answer %q, want placed-o-1", got)
				}
			}
			bodies, types := w.seen()
			oneBody(t, bodies, 3*calls)
			for _, ct := range types {
				if ct != "application/grpc+proto" {
					t.Fatalf("content-type %q, want application/grpc+proto", ct)
				}
			}
		})
	}
}

// TestHedgedCopiesOfAKeyedCallSendOneBody: the copies of a hedged call
// with a key, sent concurrently from one request, are one body.
func TestHedgedCopiesOfAKeyedCallSendOneBody(t *testing.T) {
	s := newKeyedSchema(t)
	w := serveWire(t, s)
	w.wait = 100 * time.Millisecond // every copy is slower than the delay: all three are sent
	h := placeHandle(t, s, dialWire(t, w), policy.Method{Idempotent: true, IdempotencyKey: "order_id",
		Hedging: &policy.Hedging{Delay: 10 * time.Millisecond, MaxCopies: 3}})
	if _, err := h.Call(ctxWithin(t, 5*time.Second), s.request("o-1")); err != nil {
		t.Fatalf("call: %v", err)
	}
	bodies, _ := w.seen()
	oneBody(t, bodies, 3)
}

// countingCodec is a program's own codec: gRPC's, counting the requests
// it writes.
type countingCodec struct{ marshals *atomic.Int64 }

func (c countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	c.marshals.Add(1)
	return encoding.GetCodecV2(protocodec.Name).Marshal(v)
}

func (c countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(protocodec.Name).Unmarshal(data, v)
}

func (countingCodec) Name() string { return protocodec.Name }

// TestKeyedCodecAndTheCallersCodec: a connection's default codec
// (grpc.WithDefaultCallOptions) writes the requests of a method that
// sends no key (unkeyed, or keyed with no value), and the runtime adds no
// option to them (content-type application/grpc, gRPC's default); a keyed
// call's requests are written by the runtime's codec instead; a codec or
// content subtype given to the call itself is kept.
func TestKeyedCodecAndTheCallersCodec(t *testing.T) {
	s := newKeyedSchema(t)
	w := serveWire(t, s)
	var conn, call atomic.Int64
	cc := dialWire(t, w, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(countingCodec{&conn})))
	ccPlain := dialWire(t, w)
	for _, tc := range []struct {
		name       string
		cc         *grpc.ClientConn
		m          policy.Method
		id         string
		opts       []grpc.CallOption
		conn, call int64  // marshals by the connection's codec and the call's
		ct         string // the content-type sent
	}{
		{"unkeyed", cc, policy.Method{Idempotent: true}, "o-1", nil, 1, 0, "application/grpc+proto"},
		{"unkeyed, gRPC's codec", ccPlain, policy.Method{Idempotent: true}, "o-1", nil, 0, 0, "application/grpc"},
		{"a key field without a value", ccPlain, policy.Method{IdempotencyKey: "order_id"}, "", nil, 0, 0, "application/grpc"},
		{"a key field without a value, the connection's codec", cc, policy.Method{IdempotencyKey: "order_id"}, "", nil, 1, 0, "application/grpc+proto"},
		{"keyed", cc, policy.Method{IdempotencyKey: "order_id"}, "o-1", nil, 0, 0, "application/grpc+proto"},
		{"generated key", cc, policy.Method{GenerateIdempotencyKey: true}, "", nil, 0, 0, "application/grpc+proto"},
		{"keyed, the call's codec", cc, policy.Method{IdempotencyKey: "order_id"}, "o-1",
			[]grpc.CallOption{grpc.ForceCodecV2(countingCodec{&call})}, 0, 1, "application/grpc+proto"},
		{"keyed, the call's codec nil (gRPC would use the connection's)", cc, policy.Method{IdempotencyKey: "order_id"}, "o-1",
			[]grpc.CallOption{grpc.ForceCodecV2(nil)}, 0, 0, "application/grpc+proto"},
		{"keyed, the call's subtype", ccPlain, policy.Method{IdempotencyKey: "order_id"}, "o-1",
			[]grpc.CallOption{grpc.CallContentSubtype("proto")}, 0, 0, "application/grpc+proto"},
		{"keyed, the caller's other options", cc, policy.Method{IdempotencyKey: "order_id"}, "o-1",
			[]grpc.CallOption{grpc.WaitForReady(true)}, 0, 0, "application/grpc+proto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn.Store(0)
			call.Store(0)
			before, _ := w.seen()
			h := placeHandle(t, s, tc.cc, tc.m)
			if _, err := h.Call(ctxWithin(t, 5*time.Second), s.request(tc.id), tc.opts...); err != nil {
				t.Fatalf("call: %v", err)
			}
			if conn.Load() != tc.conn || call.Load() != tc.call {
				t.Errorf("the connection's codec wrote %d requests and the call's %d, want %d and %d",
					conn.Load(), call.Load(), tc.conn, tc.call)
			}
			_, types := w.seen()
			if got := types[len(before):]; len(got) != 1 || got[0] != tc.ct {
				t.Errorf("content-type %q, want %q", got, tc.ct)
			}
		})
	}
}

// TestUnkeyedCallAddsNoAllocation: the runtime's codec costs a call that
// sends no key nothing, and a keyed call given no options no allocation
// of its own: the same number of allocations as an unkeyed call, but for
// the key's metadata; one given options, one.
func TestUnkeyedCallAddsNoAllocation(t *testing.T) {
	s := newKeyedSchema(t)
	var seen []grpc.CallOption
	answer := dynamicpb.NewMessage(s.resp)
	noop := func(_ context.Context, _ *dynamicpb.Message, opts ...grpc.CallOption) (*dynamicpb.Message, error) {
		seen = opts
		return answer, nil
	}
	bind := func(m policy.Method) *runtime.UnaryHandle[dynamicpb.Message, dynamicpb.Message] {
		m.Name, m.Kind = keyedPlace, policy.KindUnary
		rt, err := runtime.NewClient(&policy.Service{Name: keyedService, Methods: []policy.Method{m}})
		if err != nil {
			t.Fatal(err)
		}
		var hooks runtime.UnaryHooks[dynamicpb.Message, dynamicpb.Message]
		if m.IdempotencyKey != "" {
			hooks.IdempotencyKey = func(*dynamicpb.Message) string { return "o-1" }
		}
		h, err := runtime.NewUnary(rt, keyedPlace, noop, hooks)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	req := s.request("o-1")
	ctx := context.Background()
	unkeyed, keyed := bind(policy.Method{}), bind(policy.Method{IdempotencyKey: "order_id"})
	if _, err := unkeyed.Call(ctx, req); err != nil || len(seen) != 0 {
		t.Fatalf("an unkeyed call: %v, options %v, want none", err, seen)
	}
	if _, err := keyed.Call(ctx, req); err != nil || len(seen) != 2 {
		t.Fatalf("a keyed call: %v, %d options, want the codec and its subtype", err, len(seen))
	}
	if a := testing.AllocsPerRun(200, func() { unkeyed.Call(ctx, req) }); a != 0 { //nolint:errcheck // a noop
		t.Errorf("an unkeyed call allocates %v times, want 0", a)
	}
	// The key's metadata allocates (AppendToOutgoingContext); the codec's
	// options, shared, do not.
	withMD := testing.AllocsPerRun(200, func() {
		_ = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, "o-1")
	})
	if a := testing.AllocsPerRun(200, func() { keyed.Call(ctx, req) }); a != withMD { //nolint:errcheck // a noop
		t.Errorf("a keyed call allocates %v times, the key's metadata %v: the codec costs %v", a, withMD, a-withMD)
	}
	// Given options of its own, a keyed call copies them beside the
	// codec's: one slice.
	wait := grpc.WaitForReady(true)
	plain := testing.AllocsPerRun(200, func() { unkeyed.Call(ctx, req, wait) })                     //nolint:errcheck // a noop
	if a := testing.AllocsPerRun(200, func() { keyed.Call(ctx, req, wait) }); a != plain+withMD+1 { //nolint:errcheck // a noop
		t.Errorf("a keyed call given an option allocates %v times, an unkeyed one %v and the key's metadata %v: want one more", a, plain, withMD)
	}
	if len(seen) != 3 {
		t.Errorf("a keyed call given an option sent %d options, want it and the codec's two", len(seen))
	}
}
