package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18bOwnTapHandle: a server with an InTapHandle of its own
// (gRPC keeps one) that calls the Guard's TapHandle and refuses some
// requests itself (a "blocked" header here). Its own check first, then
// TapHandle's answer as its own, as the README says: a refused request
// takes no place, and the places of the others come back. The other
// order, TapHandle first and a refusal after it, leaves the place taken
// until the connection closes: gRPC does not cancel the stream's context
// when a tap refuses, and that cancellation is what gives back a place
// taken for a request that never reaches the interceptor.
func TestAttackR18bOwnTapHandle(t *testing.T) {
	for _, guardFirst := range []bool{false, true} {
		name := "own check, then TapHandle"
		if guardFirst {
			name = "TapHandle, then a refusal"
		}
		t.Run(name, func(t *testing.T) {
			srv := &inventoryServer{}
			g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			blocked := func(info *tap.Info) error {
				if len(info.Header.Get("blocked")) > 0 {
					return status.Error(codes.PermissionDenied, "blocked")
				}
				return nil
			}
			own := func(ctx context.Context, info *tap.Info) (context.Context, error) {
				if guardFirst {
					ctx, err := g.TapHandle(ctx, info)
					if err != nil {
						return ctx, err
					}
					return ctx, blocked(info)
				}
				if err := blocked(info); err != nil {
					return ctx, err
				}
				return g.TapHandle(ctx, info)
			}
			s := grpc.NewServer(grpc.InTapHandle(own), grpc.ChainUnaryInterceptor(g.UnaryInterceptor))
			inventoryv1.RegisterInventoryServiceServer(s, srv)
			cc := dial(t, serveGRPC(t, s))
			client := inventoryv1.NewInventoryServiceClient(cc)
			for range 4 {
				ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, time.Second), "blocked", "yes")
				if _, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{}); status.Code(err) != codes.PermissionDenied {
					t.Fatalf("blocked request: %v, want PERMISSION_DENIED", err)
				}
			}
			if !guardFirst {
				for range 4 {
					if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
						t.Fatalf("ordinary request: %v", err)
					}
				}
				eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
				return
			}
			// Let gRPC end the refused streams, then look: the places are still
			// taken, GetStock's limit (high: 6) has 2 left.
			time.Sleep(50 * time.Millisecond)
			if n := stats(t, g).InFlight; n != 4 {
				t.Errorf("%d places held after 4 refusals made after TapHandle; gRPC cancels refused streams now? Then this order is safe too: update the README", n)
			}
			_ = cc.Close()
			eventually(t, "places given back when the connection closed", func() bool { return stats(t, g).InFlight == 0 })
		})
	}
}
