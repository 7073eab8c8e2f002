package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack24cStreamEndsThroughTwoGuards: a server stream through two
// Guards (taps chained, both stream interceptors), each shedding the
// service and giving WatchStock a DefaultTimeout of 300 ms, ended each
// way: the handler returns, the handler fails, the caller cancels, the
// caller's deadline passes, the DefaultTimeout passes (no deadline sent).
// Each ends with its own code, and after each neither Guard holds a
// place; every stream was admitted by both.
func TestAttack24cStreamEndsThroughTwoGuards(t *testing.T) {
	pol := func() *policy.Server {
		p := inventoryPolicy()
		p.Methods[2].DefaultTimeout = 300 * time.Millisecond
		return p
	}
	g1, err := NewGuard([]*policy.Server{pol()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGuard([]*policy.Server{pol()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &inventoryServer{}
	srv.onWatch = func(ctx context.Context) error {
		switch sku, _ := ctx.Value(skuKey{}).(string); sku {
		case "fail":
			return status.Error(codes.FailedPrecondition, "no such stock")
		case "wait":
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, skuServer{srv}, grpc.InTapHandle(chainedTaps(g1, g2)),
		grpc.ChainStreamInterceptor(g1.StreamInterceptor, g2.StreamInterceptor))))
	for i, tc := range []struct {
		name string
		sku  string
		ctx  func() (context.Context, context.CancelFunc)
		want codes.Code
	}{
		{"the handler returns", "ok", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Second)
		}, codes.OK},
		{"the handler fails", "fail", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Second)
		}, codes.FailedPrecondition},
		{"the caller cancels", "wait", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, codes.Canceled},
		{"the caller's deadline", "wait", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, codes.DeadlineExceeded},
		{"the DefaultTimeout", "wait", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, codes.DeadlineExceeded},
	} {
		ctx, cancel := tc.ctx()
		st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: tc.sku})
		for err == nil {
			_, err = st.Recv()
		}
		cancel()
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v; want %s", tc.name, err, tc.want)
		}
		eventually(t, tc.name+": neither Guard holds a place", func() bool {
			return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0
		})
		if a1, a2 := stats(t, g1).Admitted[PriorityLow], stats(t, g2).Admitted[PriorityLow]; a1 != uint64(i+1) || a2 != uint64(i+1) {
			t.Errorf("%s: admitted %d and %d, want %d by each", tc.name, a1, a2, i+1)
		}
	}
}

type skuKey struct{}

// skuServer passes WatchStock's requested SKU to onWatch in its context.
type skuServer struct{ *inventoryServer }

func (s skuServer) WatchStock(req *inventoryv1.WatchStockRequest, st grpc.ServerStreamingServer[inventoryv1.WatchStockResponse]) error {
	return s.inventoryServer.WatchStock(req, skuStream{st, context.WithValue(st.Context(), skuKey{}, req.GetSku())})
}

type skuStream struct {
	grpc.ServerStreamingServer[inventoryv1.WatchStockResponse]
	ctx context.Context
}

func (s skuStream) Context() context.Context { return s.ctx }
