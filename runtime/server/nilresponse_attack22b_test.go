package server

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack22bNilResponseIsKeptAsGRPCSentIt: a deduplicated handler
// returns a nil *ReserveStockResponse and no error (it committed and
// forgot its response). gRPC sends an empty message; the Guard keeps
// that, so a repeat is replayed the same empty answer rather than running
// the handler again.
func TestAttack22bNilResponseIsKeptAsGRPCSentIt(t *testing.T) {
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		return nil, nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for i := range 3 {
		var trailer metadata.MD
		resp, err := reserve(t, client, "o-nil", grpc.Trailer(&trailer))
		if err != nil || !proto.Equal(resp, &inventoryv1.ReserveStockResponse{}) {
			t.Fatalf("request %d: %v, %v; want the empty response gRPC sent", i, resp, err)
		}
		if replayed := len(trailer.Get(ReplayedHeader)) > 0; replayed != (i > 0) {
			t.Errorf("request %d: replayed %v, want %v", i, replayed, i > 0)
		}
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if s := stats(t, g); s.Replayed != 2 || s.NotKept != 0 {
		t.Errorf("replayed %d, not kept %d; want 2 and 0", s.Replayed, s.NotKept)
	}
}
