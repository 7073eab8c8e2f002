package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// skewVersion is one version of the schema of r18skew.Orders/Place: its
// request and response descriptors.
type skewVersion struct {
	req, resp protoreflect.MessageDescriptor
}

// skewSchema builds a version of r18skew whose PlaceRequest has the given
// fields (number → name, all strings), without registering it.
func skewSchema(t *testing.T, fields map[int32]string) skewVersion {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	var fs []*descriptorpb.FieldDescriptorProto
	for n, name := range fields {
		fs = append(fs, &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: str, Label: opt})
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("r18skew.proto"), Package: proto.String("r18skew"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("PlaceRequest"), Field: fs},
			{Name: proto.String("PlaceResponse"), Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("id"), Number: proto.Int32(1), Type: str, Label: opt}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return skewVersion{fd.Messages().Get(0), fd.Messages().Get(1)}
}

// skewReplica serves r18skew.Orders/Place with schema v behind a Guard on
// store, counting the handler's runs.
func skewReplica(t *testing.T, v skewVersion, store Store, runs *atomic.Int64) *grpc.ClientConn {
	t.Helper()
	const method = "/r18skew.Orders/Place"
	g, err := NewGuard([]*policy.Server{{Name: "r18skew.Orders", Methods: []policy.ServerMethod{{
		Name: method, Dedup: &policy.Dedup{TTL: time.Minute},
		NewResponse: func() proto.Message { return dynamicpb.NewMessage(v.resp) },
	}}}}, WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(g.ServerOptions()...)
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "r18skew.Orders",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Place", Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			req := dynamicpb.NewMessage(v.req)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) {
				n := runs.Add(1)
				resp := dynamicpb.NewMessage(v.resp)
				resp.Set(v.resp.Fields().ByNumber(1), protoreflect.ValueOfString("placed-"+itoa(n)))
				return resp, nil
			}
			return icpt(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, h)
		}}},
	}, struct{}{})
	return dial(t, serveGRPC(t, s))
}

// TestAttackR18RetryAcrossSchemaVersions: a rolling deploy. The new
// version of PlaceRequest drops field 2 (note; its number reserved), the
// old one still has it, and replicas of both share one store. An old
// client sends note; its first attempt runs on an old replica, and its
// retry (the answer was lost) reaches a new one, which does not know
// field 2 and so serializes it after field 3: the same bytes on the wire,
// another fingerprint. The retry is then refused as "a different
// request" (INVALID_ARGUMENT, which the client does not retry), though
// the order was placed: the caller is told its order is invalid. Both
// directions, and for a field added below the highest one set. The same
// request must be the same request whichever version decodes it: the
// repeat replays the first answer.
func TestAttackR18RetryAcrossSchemaVersions(t *testing.T) {
	withNote := skewSchema(t, map[int32]string{1: "order_id", 2: "note", 3: "sku"})
	without := skewSchema(t, map[int32]string{1: "order_id", 3: "sku"})
	for _, tc := range []struct {
		name          string
		first, second skewVersion
	}{
		{"old replica, then one that dropped the field", withNote, without},
		{"a replica that does not know the field yet, then one that does", without, withNote},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := NewMemoryStore(10)
			var runs atomic.Int64
			ccs := []*grpc.ClientConn{skewReplica(t, tc.first, store, &runs), skewReplica(t, tc.second, store, &runs)}
			// The client's message: it knows all three fields.
			req := dynamicpb.NewMessage(withNote.req)
			for n, v := range map[protoreflect.FieldNumber]string{1: "o-1", 2: "leave at the door", 3: "apple"} {
				req.Set(withNote.req.Fields().ByNumber(n), protoreflect.ValueOfString(v))
			}
			var ids []string
			for i, cc := range ccs {
				ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, 2*time.Second), runtime.IdempotencyKeyHeader, "o-1")
				resp := dynamicpb.NewMessage(withNote.resp)
				if err := cc.Invoke(ctx, "/r18skew.Orders/Place", req, resp); err != nil {
					t.Fatalf("attempt %d: %v, want the order placed or its replay", i+1, err)
				}
				ids = append(ids, resp.Get(withNote.resp.Fields().ByNumber(1)).String())
			}
			if ids[0] != ids[1] || runs.Load() != 1 {
				t.Errorf("answers %q after %d runs, want one answer and one run", ids, runs.Load())
			}
		})
	}
}

// TestAttackR18FingerprintNestedSkew: the same request, decoded by two
// versions of a schema that differ in a field of a nested message (and
// of a list of them), has one fingerprint; another value of that field,
// or the list's items in another order, another one.
func TestAttackR18FingerprintNestedSkew(t *testing.T) {
	schema := func(innerFields ...int32) protoreflect.MessageDescriptor {
		str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
		msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
		opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
		rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		var inner []*descriptorpb.FieldDescriptorProto
		for _, n := range innerFields {
			inner = append(inner, &descriptorpb.FieldDescriptorProto{Name: proto.String("f" + itoa(int64(n))), Number: proto.Int32(n), Type: str, Label: opt})
		}
		fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
			Name: proto.String("r18nested.proto"), Package: proto.String("r18nested"), Syntax: proto.String("proto3"),
			MessageType: []*descriptorpb.DescriptorProto{
				{Name: proto.String("Line"), Field: inner},
				{Name: proto.String("Order"), Field: []*descriptorpb.FieldDescriptorProto{
					{Name: proto.String("id"), Number: proto.Int32(1), Type: str, Label: opt},
					{Name: proto.String("first"), Number: proto.Int32(2), Type: msg, Label: opt, TypeName: proto.String(".r18nested.Line")},
					{Name: proto.String("lines"), Number: proto.Int32(3), Type: msg, Label: rep, TypeName: proto.String(".r18nested.Line")},
				}},
			},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return fd.Messages().Get(1)
	}
	full, old := schema(1, 2, 3), schema(1, 3)
	// wire builds an Order: id, first = line(a), lines = line(b), line(c),
	// each line with its fields 1, 2, 3 set to the value given.
	line := func(v string) []byte {
		var b []byte
		for n := protowire.Number(1); n <= 3; n++ {
			b = protowire.AppendString(protowire.AppendTag(b, n, protowire.BytesType), v+itoa(int64(n)))
		}
		return b
	}
	wire := func(a, b, c string) []byte {
		out := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "o-1")
		out = protowire.AppendBytes(protowire.AppendTag(out, 2, protowire.BytesType), line(a))
		out = protowire.AppendBytes(protowire.AppendTag(out, 3, protowire.BytesType), line(b))
		return protowire.AppendBytes(protowire.AppendTag(out, 3, protowire.BytesType), line(c))
	}
	fp := func(md protoreflect.MessageDescriptor, b []byte) Fingerprint {
		t.Helper()
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		f, err := fingerprint(m)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	same := wire("a", "b", "c")
	if fp(full, same) != fp(old, same) {
		t.Error("one request decoded by two versions of its nested message: two fingerprints, want one")
	}
	if fp(full, same) == fp(old, wire("a", "b", "x")) || fp(old, same) == fp(old, wire("a", "c", "b")) {
		t.Error("another value, or the list in another order: the same fingerprint, want another")
	}
}
