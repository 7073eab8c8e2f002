package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// concurrency counts the handlers running at once and the most seen.
type concurrency struct{ cur, peak atomic.Int64 }

func (c *concurrency) enter() {
	n := c.cur.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

func (c *concurrency) leave() { c.cur.Add(-1) }

// TestPlaceHeldUntilHandlerReturns: with a low-priority limit of 2, and
// handlers (unary and stream) that run 250 ms, past their callers' 80 ms
// deadline, requests keep arriving every 20 ms: at no time do more than 2
// handlers run, and the places are all given back when they return.
func TestPlaceHeldUntilHandlerReturns(t *testing.T) {
	for _, kind := range []string{"unary", "stream"} {
		t.Run(kind, func(t *testing.T) {
			srv := &inventoryServer{}
			var c concurrency
			slow := func(context.Context) {
				c.enter()
				defer c.leave()
				time.Sleep(250 * time.Millisecond) // ignores its context
			}
			srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
				slow(ctx)
				return &inventoryv1.GetStockResponse{}, nil
			}
			srv.onWatch = func(ctx context.Context) error { slow(ctx); return nil }
			p := inventoryPolicy()
			p.Methods[0].Priority = PriorityLow
			g, client, _ := guarded(t, srv, []*policy.Server{p})
			var wg sync.WaitGroup
			var shed atomic.Int64
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := ctxTimeout(t, 80*time.Millisecond)
					var err error
					if kind == "unary" {
						_, err = client.GetStock(ctx, &inventoryv1.GetStockRequest{})
					} else {
						var st grpc.ServerStreamingClient[inventoryv1.WatchStockResponse]
						if st, err = client.WatchStock(ctx, &inventoryv1.WatchStockRequest{}); err == nil {
							_, err = st.Recv()
						}
					}
					if status.Code(err) == codes.Unavailable {
						shed.Add(1)
					}
				}()
				time.Sleep(20 * time.Millisecond)
			}
			wg.Wait()
			eventually(t, "handlers returned", func() bool { return c.cur.Load() == 0 })
			eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
			if pk := c.peak.Load(); pk > 2 {
				t.Errorf("%d handlers ran at once, the limit is 2", pk)
			}
			if shed.Load() == 0 {
				t.Error("nothing was shed")
			}
		})
	}
}

// TestPlaceGivenBackOnPanic: a handler that panics (recovered by an
// interceptor outside the Guard's) gives its place back, unary and stream.
func TestPlaceGivenBackOnPanic(t *testing.T) {
	srv := &inventoryServer{}
	srv.onGet = func(context.Context, *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		panic("unary boom")
	}
	srv.onWatch = func(context.Context) error { panic("stream boom") }
	p := inventoryPolicy()
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	recoverUnary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = status.Errorf(codes.Internal, "panic: %v", r)
			}
		}()
		return h(ctx, req)
	}
	recoverStream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = status.Errorf(codes.Internal, "panic: %v", r)
			}
		}()
		return h(srv, ss)
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverUnary), grpc.ChainStreamInterceptor(recoverStream)}, g.ServerOptions()...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	for i := range 10 {
		_, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{})
		if status.Code(err) != codes.Internal {
			t.Fatalf("unary %d: %v, want the recovered INTERNAL", i, err)
		}
		st, err := client.WatchStock(ctxTimeout(t, time.Second), &inventoryv1.WatchStockRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Internal {
			t.Fatalf("stream %d: %v, want the recovered INTERNAL", i, fmt.Sprint(err))
		}
	}
	eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
	if s := stats(t, g); s.Admitted[PriorityHigh]+s.Admitted[PriorityLow] != 20 {
		t.Errorf("admitted %v, want 20", s.Admitted)
	}
}
