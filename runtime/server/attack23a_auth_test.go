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

// tokenOK reports whether ctx's request carries the bearer token "good".
func tokenOK(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get("authorization")
	return len(v) == 1 && v[0] == "Bearer good"
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// TestAttack23aCredentialFailureIsNotKept: UNAUTHENTICATED says the
// credentials sent with this request did not authenticate it (a token
// expired), not what the operation answers: the caller's retry with
// fresh credentials and the same key (a key chosen once per business
// operation) must run it. Under the default FinalCodes, which hold
// UNAUTHENTICATED, an auth interceptor given after ServerOptions (inside
// the Guard) refused the expired token, the Guard kept that refusal, and
// the retry with a valid token got UNAUTHENTICATED replayed for the whole
// TTL, the handler never run; so did a handler that checks the token
// itself. Neither is kept: the retry runs once and is replayed after.
// PERMISSION_DENIED, the service's answer about the authenticated caller,
// is still kept.
func TestAttack23aCredentialFailureIsNotKept(t *testing.T) {
	auth := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !tokenOK(ctx) {
			return nil, status.Error(codes.Unauthenticated, "the token expired")
		}
		return handler(ctx, req)
	}
	for _, tc := range []struct {
		name   string
		inside []grpc.ServerOption
		check  bool // the handler checks the token
	}{
		{"an auth interceptor inside the Guard", []grpc.ServerOption{grpc.ChainUnaryInterceptor(auth)}, false},
		{"the handler checking the token", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			srv := &inventoryServer{}
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				if tc.check && !tokenOK(ctx) {
					return nil, status.Error(codes.Unauthenticated, "the token expired")
				}
				return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
			}
			client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, append(g.ServerOptions(), tc.inside...)...)))
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-auth", Sku: "a", Units: 1}
			call := func(token string, opts ...grpc.CallOption) (*inventoryv1.ReserveStockResponse, error) {
				return client.ReserveStock(withToken(withKey(ctxTimeout(t, 5*time.Second), "k-auth"), token), req, opts...)
			}
			if _, err := call("expired"); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("with an expired token: %v; want UNAUTHENTICATED", err)
			}
			var trailer metadata.MD
			resp, err := call("good", grpc.Trailer(&trailer))
			if err != nil || resp.GetReservationId() != "r-o-auth" {
				t.Fatalf("the retry with a valid token: %v, %v (trailer %v); want the handler's answer, not the credential failure replayed", resp, err, trailer)
			}
			if _, err := call("good"); err != nil {
				t.Fatalf("its repeat: %v", err)
			}
			want := int64(1)
			if tc.check {
				want = 2 // the expired token's run, which refused it, and the retry's
			}
			if n, s := srv.reserveCalls.Load(), stats(t, g); n != want || s.Replayed != 1 {
				t.Errorf("the handler ran %d times, %d replays; want %d and 1 (the valid token's repeat)", n, s.Replayed, want)
			}
		})
	}
	t.Run("PERMISSION_DENIED is an answer", func(t *testing.T) {
		srv := &inventoryServer{}
		srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
			if srv.reserveCalls.Load() == 1 {
				return nil, status.Error(codes.PermissionDenied, "not your order")
			}
			return &inventoryv1.ReserveStockResponse{ReservationId: "r-2"}, nil
		}
		g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
		for i := range 2 {
			_, err := reserve(t, client, "k-denied")
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("call %d: %v; want PERMISSION_DENIED", i, err)
			}
		}
		if n, s := srv.reserveCalls.Load(), stats(t, g); n != 1 || s.Replayed != 1 {
			t.Errorf("the handler ran %d times, %d replays; want 1 and 1", n, s.Replayed)
		}
	})
}
