package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestHedgedCopiesWithAMapFieldTheServerDoesNotKnow: the hedged copies
// of one keyed call, sent concurrently, reach two replicas sharing a
// store; the second, of the schema before the map field was added, gets
// its copy while the first still runs it, waits, and must replay the
// first's answer: were the copies two bodies (gRPC's codec writing the map
// in another order for each), it would answer INVALID_ARGUMENT at once,
// an answer that ends the hedge, and the caller would be told its placed
// order is invalid.
func TestHedgedCopiesWithAMapFieldTheServerDoesNotKnow(t *testing.T) {
	const method = "/r18skew.Orders/Place"
	withTags, old := mapSchema(t, true), mapSchema(t, false)
	for _, tc := range []struct {
		name          string
		first, second skewVersion
	}{
		{"both replicas without the map", old, old},
		{"one with it, one without", withTags, old},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := NewMemoryStore(10)
			var runs, copies atomic.Int64
			// The first replica's handler outlasts the hedging delay.
			slow := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				select {
				case <-time.After(150 * time.Millisecond):
				case <-ctx.Done():
					return nil, status.FromContextError(ctx.Err()).Err()
				}
				return h(ctx, req)
			})
			ccs := []*grpc.ClientConn{mapReplica(t, tc.first, store, &runs, slow), mapReplica(t, tc.second, store, &runs)}
			rt, err := runtime.NewClient(&policy.Service{Name: "r18skew.Orders",
				Budget: &policy.Budget{Ratio: 1, MinRetries: 100, Window: time.Minute},
				Methods: []policy.Method{{Name: method, Kind: policy.KindUnary, Idempotent: true, IdempotencyKey: "order_id",
					Hedging: &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 2}}}})
			if err != nil {
				t.Fatal(err)
			}
			conns := []grpc.ClientConnInterface{rt.Conn(ccs[0]), rt.Conn(ccs[1])}
			call := func(ctx context.Context, in *dynamicpb.Message, opts ...grpc.CallOption) (*dynamicpb.Message, error) {
				out := dynamicpb.NewMessage(withTags.resp)
				if err := conns[min(copies.Add(1)-1, 1)].Invoke(ctx, method, in, out, opts...); err != nil {
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
			req := dynamicpb.NewMessage(withTags.req)
			req.Set(orderID, protoreflect.ValueOfString("o-1"))
			tags := req.Mutable(withTags.req.Fields().ByNumber(4)).Map()
			for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				tags.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString("v-"+k))
			}
			resp, err := h.Call(ctxTimeout(t, 5*time.Second), req)
			if err != nil {
				t.Fatalf("the hedged call: %v (%v), want the order placed", status.Code(err), err)
			}
			if id := resp.Get(withTags.resp.Fields().ByNumber(1)).String(); id != "placed-1" {
				t.Errorf("answer %q, want placed-1", id)
			}
			if copies.Load() != 2 || runs.Load() != 1 {
				t.Errorf("%d copies sent, the handler ran %d times; want 2 copies and one run", copies.Load(), runs.Load())
			}
		})
	}
}
