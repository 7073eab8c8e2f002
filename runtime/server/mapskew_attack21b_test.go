package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
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

// mapReplica serves r18skew.Orders/Place with schema v behind a Guard on
// store, as skewReplica does, with opts besides the Guard's.
func mapReplica(t *testing.T, v skewVersion, store Store, runs *atomic.Int64, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	const method = "/r18skew.Orders/Place"
	g, err := NewGuard([]*policy.Server{{Name: "r18skew.Orders", Methods: []policy.ServerMethod{{
		Name: method, Dedup: &policy.Dedup{TTL: time.Minute},
		NewResponse: func() proto.Message { return dynamicpb.NewMessage(v.resp) },
	}}}}, WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(append(g.ServerOptions(), opts...)...)
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

// TestAttack21bRetryWithAMapFieldTheServerDoesNotKnow: a rolling deploy
// the other way round from TestAttackR18RetryAcrossSchemaVersions'
// cases: the new schema adds a map field, the clients are deployed first,
// and a replica still runs the old schema. A map is a set, and gRPC's
// default codec writes it in Go's map-iteration order, another order at
// each marshal; the old replica hashes the field it does not know as
// sent. The client runtime marshals the request again at each attempt,
// and a caller repeating the call does too: unless a keyed call writes
// its request deterministically, each attempt of one request has another
// fingerprint, and the retry of a placed order (its answer lost) is
// refused with INVALID_ARGUMENT, "already used by a different request":
// the caller, which the README promises "a retry that crosses versions
// is replayed, not refused", is told its order is invalid. Also when the
// first attempt runs on a new replica (which sorts the map) and the retry
// on an old one. The client is the runtime's, as generated code builds it
// (a handle keyed by order_id, on the runtime's Conn): the first replica
// runs the first attempt and loses its answer (an interceptor outside the
// Guard), the runtime retries on the second replica, then the caller
// repeats the call eleven times. Every attempt must replay the first
// answer, and the handler run once.
func TestAttack21bRetryWithAMapFieldTheServerDoesNotKnow(t *testing.T) {
	const method = "/r18skew.Orders/Place"
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
			var runs, lost, attempts atomic.Int64
			lost.Store(1)
			lose := grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				if err == nil && lost.Add(-1) >= 0 {
					return nil, status.Error(codes.Unavailable, "the answer was lost")
				}
				return resp, err
			})
			ccs := []*grpc.ClientConn{mapReplica(t, tc.first, store, &runs, lose), mapReplica(t, tc.second, store, &runs)}
			rt, err := runtime.NewClient(&policy.Service{Name: "r18skew.Orders",
				Budget: &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute},
				Methods: []policy.Method{{Name: method, Kind: policy.KindUnary, IdempotencyKey: "order_id",
					Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
						Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}}}})
			if err != nil {
				t.Fatal(err)
			}
			// The plain client's method on the runtime's Conn; a balancer
			// that sends the first attempt to the first replica and every
			// other to the second.
			conns := []grpc.ClientConnInterface{rt.Conn(ccs[0]), rt.Conn(ccs[1])}
			call := func(ctx context.Context, in *dynamicpb.Message, opts ...grpc.CallOption) (*dynamicpb.Message, error) {
				out := dynamicpb.NewMessage(withTags.resp)
				if err := conns[min(attempts.Add(1)-1, 1)].Invoke(ctx, method, in, out, opts...); err != nil {
					return nil, err
				}
				return out, nil
			}
			orderID := withTags.req.Fields().ByNumber(1)
			h, err := runtime.NewUnary(rt, method, call, runtime.UnaryHooks[dynamicpb.Message, dynamicpb.Message]{
				IdempotencyKey: func(in *dynamicpb.Message) string { return in.Get(orderID).String() },
			})
			if err != nil {
				t.Fatal(err)
			}
			// The new client's request: eight tags, so that two
			// marshals of it rarely write them in one order.
			req := dynamicpb.NewMessage(withTags.req)
			req.Set(orderID, protoreflect.ValueOfString("o-1"))
			tags := req.Mutable(withTags.req.Fields().ByNumber(4)).Map()
			for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				tags.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString("v-"+k))
			}
			var ids []string
			for i := range 12 {
				resp, err := h.Call(ctxTimeout(t, 2*time.Second), req)
				if err != nil {
					t.Fatalf("call %d of one request: %v (%v), want the order placed or its replay", i+1, status.Code(err), err)
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
			if lost.Load() != 0 || attempts.Load() != 13 {
				t.Errorf("%d attempts, the first answer lost: %v; want 13 attempts, the first lost and retried", attempts.Load(), lost.Load() == 0)
			}
		})
	}
}
