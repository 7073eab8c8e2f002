package server

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
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
		t.Run(tc.name, func(t *testing.T) { wantForwardedTrailerUnmarked(t, tc.set) })
	}
}
