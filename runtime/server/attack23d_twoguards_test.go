package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// upperSku is an interceptor of the server's own that normalizes a
// ReserveStock request (its SKU upper-cased).
func upperSku(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*inventoryv1.ReserveStockRequest); ok {
		r.Sku = strings.ToUpper(r.Sku)
	}
	return handler(ctx, req)
}

// twoGuardsOnOneStore returns two Guards of inventoryPolicy on one memory
// store.
func twoGuardsOnOneStore(t *testing.T) (*Guard, *Guard) {
	t.Helper()
	store := NewMemoryStore(10)
	var gs [2]*Guard
	for i := range gs {
		g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	return gs[0], gs[1]
}

// TestAttack23dOtherBodyUnderTheKeyWhileTheFirstRunsThroughTwoGuards: the
// inner Guard passes on the outer's claim of this very request before it
// compares fingerprints (3b4fec0). A client that sends the same key with
// another body while the first request runs, through both Guards on one
// store with a normalizing interceptor between them, is still refused
// INVALID_ARGUMENT (by the outer, which finds the claim under another
// token); the same body meanwhile waits and gets the first's answer
// replayed; the handler runs once.
func TestAttack23dOtherBodyUnderTheKeyWhileTheFirstRunsThroughTwoGuards(t *testing.T) {
	g1, g2 := twoGuardsOnOneStore(t)
	srv := &inventoryServer{}
	running, release := make(chan struct{}), make(chan struct{})
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		close(running)
		<-release
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetSku()}, nil
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(chainedTaps(g1, g2)),
		grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, upperSku, g2.UnaryInterceptor))))
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-d", Sku: "abc", Units: 1}
	first := make(chan error, 1)
	go func() {
		resp, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-d"), req)
		if err == nil && resp.GetReservationId() != "r-ABC" {
			err = status.Errorf(codes.Internal, "answer %q", resp.GetReservationId())
		}
		first <- err
	}()
	<-running
	other := &inventoryv1.ReserveStockRequest{OrderId: "o-d", Sku: "xyz", Units: 1}
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-d"), other); status.Code(err) != codes.InvalidArgument {
		t.Errorf("another body under the running key: %v; want INVALID_ARGUMENT", err)
	}
	// The same body in upper case (what the normalization makes of the
	// first) is another body as the client sent it.
	upper := &inventoryv1.ReserveStockRequest{OrderId: "o-d", Sku: "ABC", Units: 1}
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-d"), upper); status.Code(err) != codes.InvalidArgument {
		t.Errorf("the normalized body under the running key: %v; want INVALID_ARGUMENT", err)
	}
	same := make(chan error, 1)
	go func() {
		resp, err := client.ReserveStock(withKey(ctxTimeout(t, 5*time.Second), "k-d"), req)
		if err == nil && resp.GetReservationId() != "r-ABC" {
			err = status.Errorf(codes.Internal, "answer %q", resp.GetReservationId())
		}
		same <- err
	}()
	eventually(t, "the same body waits for the first", func() bool { return stats(t, g1).Waited == 1 })
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first request: %v", err)
	}
	if err := <-same; err != nil {
		t.Fatalf("the same body sent while it ran: %v; want the first's answer replayed", err)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if s1, s2 := stats(t, g1), stats(t, g2); s1.Mismatched != 2 || s2.Mismatched != 0 || s1.Replayed != 1 || s2.Waited != 0 {
		t.Errorf("outer: %d mismatched, %d replayed; inner: %d mismatched, %d waited; want 2, 1, 0, 0",
			s1.Mismatched, s1.Replayed, s2.Mismatched, s2.Waited)
	}
	eventually(t, "both Guards gave their places back", func() bool {
		return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0
	})
}
