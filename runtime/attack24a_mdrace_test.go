package runtime_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestAttack24aSharedCallAndTheStartersMetadataMap: L starts the shared
// call with outgoing metadata of its own map (metadata.NewOutgoingContext
// keeps the map, it copies nothing) and gives up at once; once L
// returned, it writes its map again, as it owns it; the shared call,
// let go after, reads it on its own goroutine (-race).
func TestAttack24aSharedCallAndTheStartersMetadataMap(t *testing.T) {
	atkNoLeak(t)
	j := newJoin23j(t)
	md := metadata.MD{"x-tenant": {"acme"}}
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), md))
	done := make(chan error, 1)
	go func() { _, err := j.get(ctx); done <- err }()
	j.gate.next(t, "L's shared call")
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("caller L: %v, want its CANCELLED", err)
	}
	j.gate.release <- struct{}{}
	md["x-tenant"] = []string{"other"} // L's own again
	atkWaitFor(t, "the shared call's answer kept", func() bool { return j.m.CacheHolds23j("apple") })
}
