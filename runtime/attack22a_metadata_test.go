package runtime_test

// Attacks on what a call that fails on the client's own side tells the
// layers (README, "Failures and answers": "when the call fails on the
// client's own side, the breaker counts the attempt as nothing too"). A
// caller's outgoing metadata that gRPC cannot carry (a value with a byte
// outside printable ASCII under a key not ending in -bin, a key with an
// upper-case letter) makes grpc-go fail the call with INTERNAL before
// anything is sent (stream.go, newClientStream: "header key … contains
// value with non-printable ASCII characters"). A service forwarding a
// header of its own caller's (a user agent, a name) does this for every
// such request.

import (
	"context"
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

// TestAttack22aUnsendableMetadataDoesNotCloseTheBreaker: the breaker
// towards a dependency that is down is half-open; its one probe is a call
// that gRPC refuses to send: its metadata (a value with a byte outside
// printable ASCII, a key with a space, an empty key), or a call option naming a
// compressor or a codec the program did not register
// (grpc.UseCompressor("gzip") without importing grpc/encoding/gzip).
// Nothing reached the dependency, so the probe must free its place and
// the breaker stay half-open, for the next call to probe. Before, gRPC's
// INTERNAL was taken for the dependency's answer (INTERNAL is no failure
// code): the probe succeeded, the breaker closed, and the calls after it
// went to the dead dependency again; and a fallback answered the call.
func TestAttack22aUnsendableMetadataDoesNotCloseTheBreaker(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(context.Context) context.Context
		opts []grpc.CallOption
	}{
		{name: "a metadata value outside printable ASCII", ctx: func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "x-forwarded-name", "Zo\xeb")
		}},
		{name: "a metadata key outside [0-9a-z-_.]", ctx: func(ctx context.Context) context.Context {
			return metadata.NewOutgoingContext(ctx, metadata.MD{"x forwarded": {"v"}})
		}},
		{name: "an empty metadata key", ctx: func(ctx context.Context) context.Context {
			return metadata.NewOutgoingContext(ctx, metadata.MD{"": {"v"}})
		}},
		{name: "a compressor not registered", opts: []grpc.CallOption{grpc.UseCompressor("attack22a-none")}},
		{name: "a codec not registered", opts: []grpc.CallOption{grpc.CallContentSubtype("attack22a-none")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			srv, cc := startFault(t, server.Fail(codes.Unavailable))
			clk := newAtkClock()
			fell := 0
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithClock(clk)},
				GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
					fell++
					return &inventoryv1.GetStockResponse{Units: 99}, nil
				},
			}, func(p *policy.Service) {
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: 10 * time.Second, CoolDown: time.Second,
					HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
				m := atkMethod(p, atkGetStock)
				m.Retry, m.Hedging, m.AdaptiveLimit = nil, nil, nil
				p.AdaptiveLimit, p.ClientThrottle = nil, nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req := &inventoryv1.GetStockRequest{Sku: "apple"}
			for range 2 {
				_, _ = c.GetStock(ctx, req)
			}
			atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "after 2 failures of 2 the breaker is %v, want open")
			clk.Advance(2 * time.Second)
			atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateHalfOpen, "past the cool-down the breaker is %v, want half-open")

			sent := srv.Calls(atkGetStock)
			fell = 0 // the fallback answered the two failures
			bad := ctx
			if tc.ctx != nil {
				bad = tc.ctx(ctx)
			}
			_, err := c.GetStock(bad, req, tc.opts...)
			if status.Code(err) != codes.Internal {
				t.Errorf("a call gRPC cannot send: %v, want gRPC's INTERNAL", err)
			}
			if n := srv.Calls(atkGetStock); n != sent {
				t.Fatalf("the server saw %d more calls, want none", n-sent)
			}
			if fell != 0 {
				t.Errorf("the fallback answered a call that failed on the client's side")
			}
			atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateHalfOpen,
				"after a probe that never left the client the breaker is %v, want half-open still")

			// The next call is the probe, reaches the dependency, and reopens.
			if _, err := c.GetStock(ctx, req); err != nil && status.Code(err) != codes.Unavailable {
				t.Fatalf("the probe: %v", err)
			}
			if n := srv.Calls(atkGetStock); n != sent+1 {
				t.Errorf("the server saw %d more calls, want the probe", n-sent)
			}
			atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "after the probe failed the breaker is %v, want open")
		})
	}
}
