package server

import (
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// atk26cGroupSchema builds a proto2 Order {string id = 1; group Line = 2
// {string f<n> = n; …}} whose group knows the fields given, the way
// protoc writes a group (a nested message named after the field, a
// field of TYPE_GROUP).
func atk26cGroupSchema(t *testing.T, groupFields ...int32) protoreflect.MessageDescriptor {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	var inner []*descriptorpb.FieldDescriptorProto
	for _, n := range groupFields {
		inner = append(inner, &descriptorpb.FieldDescriptorProto{Name: proto.String("f" + itoa(int64(n))), Number: proto.Int32(n), Type: str, Label: opt})
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("atk26cgroup.proto"), Package: proto.String("atk26cgroup"), Syntax: proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name:       proto.String("Order"),
			NestedType: []*descriptorpb.DescriptorProto{{Name: proto.String("Line"), Field: inner}},
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("id"), Number: proto.Int32(1), Type: str, Label: opt},
				{Name: proto.String("line"), Number: proto.Int32(2), Type: descriptorpb.FieldDescriptorProto_TYPE_GROUP.Enum(), Label: opt, TypeName: proto.String(".atk26cgroup.Order.Line")},
			},
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().Get(0)
}

// TestAttack26CFingerprintGroupSkew: the README ("A key belongs to one
// request") promises that every field, known or not, of the request and
// of each message in it takes its place by field number, so that a
// replica that knows a field and one that does not see one request and a
// retry that crosses versions is replayed, not refused. A proto2 group
// (or an editions message field with DELIMITED encoding, the same wire
// form) is a message in the request: a replica whose group lacks field 2
// serializes it after field 3, the other in order. The same bytes on the
// wire must have one fingerprint whichever version decodes them; over
// gRPC, two replicas of the two versions on one store, the retry that
// reaches the other version is replayed, the handler run once.
func TestAttack26CFingerprintGroupSkew(t *testing.T) {
	full, old := atk26cGroupSchema(t, 1, 2, 3), atk26cGroupSchema(t, 1, 3)
	resp := skewSchema(t, map[int32]string{1: "order_id"}).resp
	wire := func(v string) []byte {
		b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "o-1")
		b = protowire.AppendTag(b, 2, protowire.StartGroupType)
		for n := protowire.Number(1); n <= 3; n++ {
			b = protowire.AppendString(protowire.AppendTag(b, n, protowire.BytesType), v+itoa(int64(n)))
		}
		return protowire.AppendTag(b, 2, protowire.EndGroupType)
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
	same := wire("a")
	atk26cGroupAcrossReplicas(t, full, old, resp, same)
	if fp(full, same) != fp(old, same) {
		t.Error("one request (a group with fields 1, 2, 3) decoded by two versions of its group (one without field 2): " +
			"two fingerprints, so a retry that crosses versions is refused INVALID_ARGUMENT as another request; the README promises every field of each message in the request takes its place by field number")
	}
	if fp(old, same) == fp(old, wire("b")) {
		t.Error("another value in the group: the same fingerprint, want another")
	}
}

// over gRPC: the client's request, written by the full version; its first
// attempt on one replica, its retry (the answer lost) on the other.
func atk26cGroupAcrossReplicas(t *testing.T, full, old, resp protoreflect.MessageDescriptor, raw []byte) {
	t.Helper()
	for _, order := range [][2]protoreflect.MessageDescriptor{{full, old}, {old, full}} {
		store := NewMemoryStore(10)
		var runs atomic.Int64
		ccs := []*grpc.ClientConn{
			skewReplica(t, skewVersion{order[0], resp}, store, &runs),
			skewReplica(t, skewVersion{order[1], resp}, store, &runs),
		}
		req := dynamicpb.NewMessage(full)
		if err := proto.Unmarshal(raw, req); err != nil {
			t.Fatal(err)
		}
		var answers []string
		for _, cc := range ccs {
			ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, 2*time.Second), runtime.IdempotencyKeyHeader, "o-1")
			out := dynamicpb.NewMessage(resp)
			if err := cc.Invoke(ctx, "/r18skew.Orders/Place", req, out); err != nil {
				answers = append(answers, status.Code(err).String())
				continue
			}
			answers = append(answers, out.Get(resp.Fields().ByNumber(1)).String())
		}
		if runs.Load() != 1 || answers[0] != answers[1] {
			t.Errorf("group field across versions (%s first): answers %q after %d runs; the README promises a retry that crosses versions is replayed, not refused (one answer, one run)",
				map[bool]string{true: "the full version", false: "the old version"}[order[0] == full], answers, runs.Load())
		}
	}
}
