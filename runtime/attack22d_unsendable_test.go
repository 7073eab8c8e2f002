package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack22dUnsendableCallsFeedNoAdaptiveLayer: README, Failures and
// answers: a call gRPC refuses to send (metadata it cannot carry, a
// compressor never registered) or past the caller's send limit is
// counted as nothing. 100 such calls, then calls of a healthy
// dependency: the throttler (K 1) must refuse none of them, and the
// adaptive limit (4, min 1) must still let 4 calls be in flight at once.
// Counted as requests without accepts, the throttler would refuse 9 in
// 10; counted as drops, the limit would be halved to 1.
func TestAttack22dUnsendableCallsFeedNoAdaptiveLayer(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	srv, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		attack22dPlain(p).Timeout = 300 * time.Millisecond
		p.ClientThrottle = &policy.Throttle{K: 1, Window: time.Minute, MaxRefusal: 0.9}
		// Loopback's jitter alone must not move the limit: only drops may.
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 4, MinLimit: 1, MaxLimit: 4, Tolerance: 1000}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	apple := &inventoryv1.GetStockRequest{Sku: "apple"}
	bad := []struct {
		name string
		ctx  context.Context
		req  *inventoryv1.GetStockRequest
		opts []grpc.CallOption
		code codes.Code
	}{
		{"a metadata value outside printable ASCII", metadata.AppendToOutgoingContext(ctx, "x-name", "Zo\xeb"), apple, nil, codes.Internal},
		{"a metadata key outside [0-9a-z-_.]", metadata.NewOutgoingContext(ctx, metadata.MD{"X-Name": {"v"}}), apple, nil, codes.Internal},
		{"a compressor never registered", ctx, apple, []grpc.CallOption{grpc.UseCompressor("attack22d-none")}, codes.Internal},
		{"a request past the send limit", ctx, &inventoryv1.GetStockRequest{Sku: strings.Repeat("s", 200)},
			[]grpc.CallOption{grpc.MaxCallSendMsgSize(64)}, codes.ResourceExhausted},
	}
	for i := range 100 {
		b := bad[i%len(bad)]
		if _, err := c.GetStock(b.ctx, b.req, b.opts...); status.Code(err) != b.code {
			t.Fatalf("%s: %v, want %v from gRPC", b.name, err, b.code)
		}
	}
	if n := srv.Calls(atkGetStock); n != 0 {
		t.Fatalf("the server saw %d calls, want 0", n)
	}
	for range 20 {
		if _, err := c.GetStock(ctx, apple); err != nil {
			t.Fatalf("a call of a healthy dependency after 100 unsent: %v", err)
		}
	}
	srv.SetBehaviour(atkHold(release))
	done := make(chan error, 4)
	for range 4 {
		go func() { _, err := c.GetStock(ctx, apple, grpc.WaitForReady(true)); done <- err }()
	}
	for srv.InFlight() < 4 {
		select {
		case err := <-done:
			t.Fatalf("a call held with the others ended with %v, %d in flight on the server", err, srv.InFlight())
		case <-time.After(2 * time.Millisecond):
		}
	}
	close(release)
	for range 4 {
		if err := <-done; err != nil && !errors.Is(err, runtime.ErrThrottled) {
			t.Errorf("a call held with 3 others: %v", err)
		}
	}
}
