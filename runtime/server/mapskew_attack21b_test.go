package server

import (
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/go-resilient/resilient/runtime"
)

// mapSchema is a version of r18skew.Orders/Place whose PlaceRequest has
// order_id (1) and, withTags, a map<string, string> tags (4): the field a
// new version of the schema adds.
func mapSchema(t *testing.T, withTags bool) skewVersion {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	req := &descriptorpb.DescriptorProto{Name: proto.String("PlaceRequest"), Field: []*descriptorpb.FieldDescriptorProto{
		{Name: proto.String("order_id"), Number: proto.Int32(1), Type: str, Label: opt},
	}}
	if withTags {
		req.Field = append(req.Field, &descriptorpb.FieldDescriptorProto{
			Name: proto.String("tags"), Number: proto.Int32(4), Type: msg, Label: rep, TypeName: proto.String(".r21bmap.PlaceRequest.TagsEntry"),
		})
		req.NestedType = []*descriptorpb.DescriptorProto{{
			Name: proto.String("TagsEntry"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("key"), Number: proto.Int32(1), Type: str, Label: opt},
				{Name: proto.String("value"), Number: proto.Int32(2), Type: str, Label: opt},
			},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		}}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("r21bmap.proto"), Package: proto.String("r21bmap"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			req,
			{Name: proto.String("PlaceResponse"), Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("id"), Number: proto.Int32(1), Type: str, Label: opt}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return skewVersion{fd.Messages().Get(0), fd.Messages().Get(1)}
}

// TestAttack21bRetryWithAMapFieldTheServerDoesNotKnow: a rolling deploy
// the other way round from TestAttackR18RetryAcrossSchemaVersions'
// cases: the new schema adds a map field, the clients are deployed first,
// and a replica still runs the old schema. A map is a set, and the Go
// client marshals it in map-iteration order, another order at each
// attempt (gRPC's codec is not deterministic); the old replica hashes the
// field it does not know as sent, so each attempt of one request has
// another fingerprint. The client's retry of a placed order (its answer
// lost) is then refused with INVALID_ARGUMENT, "already used by a
// different request": the caller, which the README promises "a retry
// that crosses versions is replayed, not refused", is told its order is
// invalid. Also when the first attempt runs on a new replica (which sorts
// the map) and the retry on an old one. Every attempt must replay the
// first answer, and the handler run once.
func TestAttack21bRetryWithAMapFieldTheServerDoesNotKnow(t *testing.T) {
	t.Skip("BROKEN: fingerprint.go hashes a field the server does not know as sent, and the Go client marshals a map field in random order at each attempt: a retry of one request to a replica that does not know the map field (a rolling deploy adding it) gets INVALID_ARGUMENT 'already used by a different request' though the first attempt ran; fix on the client (marshal requests of deduplicated methods deterministically) and say it in the README")
	withTags, old := mapSchema(t, true), mapSchema(t, false)
	for _, tc := range []struct {
		name          string
		first, second skewVersion
	}{
		{"every attempt on a replica that does not know the map", old, old},
		{"a replica that knows it, then one that does not", withTags, old},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := NewMemoryStore(10)
			var runs atomic.Int64
			ccs := []*grpc.ClientConn{skewReplica(t, tc.first, store, &runs), skewReplica(t, tc.second, store, &runs)}
			// The new client's request: eight tags, so that two
			// marshals of it rarely write them in one order.
			req := dynamicpb.NewMessage(withTags.req)
			req.Set(withTags.req.Fields().ByNumber(1), protoreflect.ValueOfString("o-1"))
			tags := req.Mutable(withTags.req.Fields().ByNumber(4)).Map()
			for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				tags.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString("v-"+k))
			}
			var ids []string
			for i := range 12 {
				cc := ccs[min(i, 1)]
				ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, 2*time.Second), runtime.IdempotencyKeyHeader, "o-1")
				resp := dynamicpb.NewMessage(withTags.resp)
				if err := cc.Invoke(ctx, "/r18skew.Orders/Place", req, resp); err != nil {
					t.Fatalf("attempt %d of one request: %v (%v), want the order placed or its replay", i+1, status.Code(err), err)
				}
				ids = append(ids, resp.Get(withTags.resp.Fields().ByNumber(1)).String())
			}
			for _, id := range ids {
				if id != ids[0] {
					t.Fatalf("answers %q, want one", ids)
				}
			}
			if runs.Load() != 1 {
				t.Errorf("the handler ran %d times for one key, want once", runs.Load())
			}
		})
	}
}
