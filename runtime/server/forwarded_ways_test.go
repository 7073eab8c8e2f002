package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// forwardingGetter is B: its GetStock calls C's GetStock, forwards C's
// trailer with set (given the handler's context), and answers an
// UNAVAILABLE of its own without details.
func forwardingGetter(toC inventoryv1.InventoryServiceClient, forwarded *atomic.Int64, set func(context.Context, metadata.MD)) *inventoryServer {
	return &inventoryServer{onGet: func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		var md metadata.MD
		_, err := toC.GetStock(lowCtx(ctx), req, grpc.Trailer(&md))
		forwarded.Add(int64(len(md.Get(statusDetailsKey))))
		set(ctx, md)
		if err != nil {
			return nil, status.Error(codes.Unavailable, "B: the stock lookup failed")
		}
		return &inventoryv1.GetStockResponse{}, nil
	}}
}

// TestForwardedTrailerLosesTheMarkEveryWay: B forwards C's marked trailer
// by each way a handler has besides the ones tested beside it: from a
// goroutine it spawns and waits for, through a context derived from its
// own (a cancel and a value on top), and behind two Guards on one server,
// both with a policy for the method (the inner one wraps the outer's
// stream). Each time B's caller gets B's UNAVAILABLE with C's RetryInfo
// and without C's SHED mark.
func TestForwardedTrailerLosesTheMarkEveryWay(t *testing.T) {
	type ctxKey struct{}
	for _, tc := range []struct {
		name   string
		set    func(context.Context, metadata.MD)
		guards int
	}{
		{"from a goroutine", func(ctx context.Context, md metadata.MD) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = grpc.SetTrailer(ctx, md)
			}()
			<-done
		}, 1},
		{"through a derived context", func(ctx context.Context, md metadata.MD) {
			ctx, cancel := context.WithCancel(context.WithValue(ctx, ctxKey{}, 1))
			defer cancel()
			_ = grpc.SetTrailer(ctx, md)
		}, 1},
		{"behind two Guards", func(ctx context.Context, md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toC, _ := shedAllLow(t)
			var forwarded atomic.Int64
			b := forwardingGetter(toC, &forwarded, tc.set)
			var chain []grpc.UnaryServerInterceptor
			for range tc.guards {
				p := inventoryPolicy()
				p.Shedding = nil
				g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
				if err != nil {
					t.Fatal(err)
				}
				chain = append(chain, g.UnaryInterceptor)
			}
			toB := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, b, grpc.ChainUnaryInterceptor(chain...))))
			_, got := toB.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"})
			if shed, retryInfo := shedMarks(got); status.Code(got) != codes.Unavailable || shed || !retryInfo {
				t.Errorf("B's answer %v (shed mark %v, RetryInfo %v); want B's UNAVAILABLE with C's RetryInfo, without C's mark", got, shed, retryInfo)
			}
			if forwarded.Load() == 0 {
				t.Error("B forwarded no grpc-status-details-bin: C's refusal was not marked, the test proves nothing")
			}
		})
	}
}

// sliceStream is a grpc.ServerTransportStream of a type that cannot be
// compared.
type sliceStream []string

func (sliceStream) Method() string               { return getStock }
func (sliceStream) SetHeader(metadata.MD) error  { return nil }
func (sliceStream) SendHeader(metadata.MD) error { return nil }
func (sliceStream) SetTrailer(metadata.MD) error { return nil }

// boxedStream is a grpc.ServerTransportStream of a type that can be
// compared, holding one that cannot: comparing two of them panics.
type boxedStream struct{ grpc.ServerTransportStream }

// TestServedContextWithAStreamThatCannotBeCompared: a stream in the
// request's context whose values cannot be compared (a type that cannot,
// or a value type holding one that cannot) is no panic of the Guard's:
// the handler is served, and finds the stream as it was given, its other
// values too.
func TestServedContextWithAStreamThatCannotBeCompared(t *testing.T) {
	p := inventoryPolicy()
	p.Shedding = nil
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	type ctxKey struct{}
	info := &grpc.UnaryServerInfo{FullMethod: getStock}
	for _, tc := range []struct {
		name string
		s    grpc.ServerTransportStream
	}{
		{"a slice", sliceStream{"a"}},
		{"a value holding a slice", boxedStream{sliceStream{"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			ctx := context.WithValue(grpc.NewContextWithServerTransportStream(base, tc.s), ctxKey{}, tc.s)
			var seen, other grpc.ServerTransportStream
			_, err := g.UnaryInterceptor(ctx, nil, info, func(ctx context.Context, req any) (any, error) {
				seen = grpc.ServerTransportStreamFromContext(ctx)
				other, _ = ctx.Value(ctxKey{}).(grpc.ServerTransportStream)
				return req, grpc.SetTrailer(ctx, metadata.Pairs("x-trace", "t-1"))
			})
			if err != nil {
				t.Fatal(err)
			}
			if seen == nil || other == nil || seen.Method() != getStock || other.Method() != getStock {
				t.Errorf("the handler found the stream %T and the other value %T; want both as given", seen, other)
			}
		})
	}
}
