package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

type attack21cKey struct{}

// TestAttack21cForwardedMarksEveryWayAStreamSetsThem: a stream handler
// behind the Guard forwards C's shedding refusal (its
// grpc-status-details-bin, marked SHED) as a trailer in ways the README's
// list leaves implicit: through the transport stream taken from the
// stream's context, and from a goroutine of the handler on a context
// derived from the stream's (WithValue, WithCancel, WithoutCancel). B's
// caller must never see C's mark; without the Guard's stripping both fail.
// (The same details set as a header do not reach grpc-go's caller as the
// status, stripped or not, so a header case here could not fail.)
func TestAttack21cForwardedMarksEveryWayAStreamSetsThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(grpc.ServerStream, metadata.MD)
	}{
		{"transport stream SetTrailer", func(ss grpc.ServerStream, md metadata.MD) {
			_ = grpc.ServerTransportStreamFromContext(ss.Context()).SetTrailer(md)
		}},
		{"goroutine, derived context", func(ss grpc.ServerStream, md metadata.MD) {
			ctx, cancel := context.WithCancel(context.WithValue(ss.Context(), attack21cKey{}, 1))
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = grpc.SetTrailer(context.WithoutCancel(ctx), md)
			}()
			<-done
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toC, _ := shedAllLow(t)
			b := &forwardingWatcher{toC: toC, set: tc.set}
			bPolicy := inventoryPolicy()
			bPolicy.Shedding = nil
			g, err := NewGuard([]*policy.Server{bPolicy}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			toB := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, b, g.ServerOptions()...)))
			stream, err := toB.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{Sku: "a"})
			if err != nil {
				t.Fatal(err)
			}
			_, got := stream.Recv()
			if shed, _ := shedMarks(got); status.Code(got) != codes.Unavailable || shed {
				t.Errorf("B's stream ended %v (shed mark %v); want B's UNAVAILABLE without C's mark", got, shed)
			}
			if b.forwarded.Load() == 0 {
				t.Error("B forwarded no grpc-status-details-bin: C's refusal was not marked, the test proves nothing")
			}
		})
	}
}
