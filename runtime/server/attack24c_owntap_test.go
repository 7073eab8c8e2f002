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

// TestAttack24cOwnTapRefusalAfterTapHandle: "A tap that refuses a
// request after TapHandle admitted it leaves its place taken until the
// connection closes". gRPC roots a stream's context in
// context.Background, not in its connection, and never cancels the
// context of a stream its tap refused: closing the connection gives
// nothing back. A request sent without a deadline and refused so held
// its place for good, DefaultTimeout or not, and as many as the limit
// had the service shed every request of the priority until the process
// restarted. With a DefaultTimeout the place now comes back when it
// passes (the place is tied to the context the DefaultTimeout bounds);
// without one it is still held after the connection closed (the limit
// this test asserts: call TapHandle last).
func TestAttack24cOwnTapRefusalAfterTapHandle(t *testing.T) {
	for _, timeout := range []time.Duration{200 * time.Millisecond, 0} {
		t.Run("DefaultTimeout "+timeout.String(), func(t *testing.T) {
			p := inventoryPolicy()
			p.Methods[0].DefaultTimeout = timeout
			g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			own := func(ctx context.Context, info *tap.Info) (context.Context, error) {
				ctx, err := g.TapHandle(ctx, info)
				if err != nil || len(info.Header.Get("blocked")) == 0 {
					return ctx, err
				}
				return ctx, status.Error(codes.PermissionDenied, "blocked")
			}
			s := grpc.NewServer(grpc.InTapHandle(own), grpc.ChainUnaryInterceptor(g.UnaryInterceptor))
			inventoryv1.RegisterInventoryServiceServer(s, &inventoryServer{})
			cc := dial(t, serveGRPC(t, s))
			client := inventoryv1.NewInventoryServiceClient(cc)
			for range 4 {
				ctx := metadata.AppendToOutgoingContext(context.Background(), "blocked", "yes")
				if _, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{}); status.Code(err) != codes.PermissionDenied {
					t.Fatalf("blocked request: %v, want PERMISSION_DENIED", err)
				}
			}
			if n := stats(t, g).InFlight; n != 4 {
				t.Fatalf("%d places held right after 4 refusals made after TapHandle, want 4", n)
			}
			_ = cc.Close()
			if timeout > 0 {
				start := time.Now()
				eventually(t, "places given back at the DefaultTimeout", func() bool { return stats(t, g).InFlight == 0 })
				if el := time.Since(start); el > timeout+time.Second {
					t.Errorf("places came back after %s, want within the DefaultTimeout %s and a little", el, timeout)
				}
				return
			}
			time.Sleep(300 * time.Millisecond)
			if n := stats(t, g).InFlight; n != 4 {
				t.Errorf("%d places held 300ms after the connection closed; gRPC cancels a refused stream's context now? Then update the README", n)
			}
		})
	}
}
