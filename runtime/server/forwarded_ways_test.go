package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/go-resilient/resilient/runtime"
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

// recordingStream is gRPC's side of a request for the Guard's
// interceptors called without a server: it keeps every header and trailer
// set on it, each under the name of the way it was set.
type recordingStream struct {
	grpc.ServerStream // nil: only the methods below are called
	mu                sync.Mutex
	got               map[string]metadata.MD
	ctx               context.Context
}

func (s *recordingStream) keep(way string, md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[way] = md
	return nil
}

func (s *recordingStream) Method() string                  { return getStock }
func (s *recordingStream) SetHeader(md metadata.MD) error  { return s.keep("SetHeader", md) }
func (s *recordingStream) SendHeader(md metadata.MD) error { return s.keep("SendHeader", md) }
func (s *recordingStream) SetTrailer(md metadata.MD) error { return s.keep("SetTrailer", md) }
func (s *recordingStream) Context() context.Context        { return s.ctx }
func (s *recordingStream) streamSetTrailer(md metadata.MD) { _ = s.keep("SetTrailer", md) }
func (s *recordingStream) marked(t *testing.T, way string) bool {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	md, ok := s.got[way]
	if !ok {
		t.Fatalf("nothing was set by %s", way)
	}
	for _, v := range md.Get(statusDetailsKey) {
		sp := new(spb.Status)
		if err := proto.Unmarshal([]byte(v), sp); err != nil {
			t.Fatal(err)
		}
		if shed, _ := shedMarks(status.FromProto(sp).Err()); shed {
			return true
		}
	}
	return false
}

// streamRecorder is a recordingStream seen as a grpc.ServerStream, whose
// SetTrailer returns nothing.
type streamRecorder struct{ *recordingStream }

func (s streamRecorder) SetTrailer(md metadata.MD) { s.streamSetTrailer(md) }

// TestEveryWayToSetMetadataLosesTheMarks: a grpc-status-details-bin
// holding the Guard's SHED mark loses it by each of the six ways a
// handler has to set headers and trailers: grpc.SetHeader, grpc.SendHeader
// and grpc.SetTrailer on its context, for a unary and for a stream
// method, and the stream's own SetHeader, SendHeader and SetTrailer. What
// reaches gRPC's stream has no mark; x-trace beside it is kept.
func TestEveryWayToSetMetadataLosesTheMarks(t *testing.T) {
	shed, _ := anypb.New(&errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: runtime.DoNotRetryDomain})
	md := metadata.Pairs(statusDetailsKey, detailsBin(t, status.FromProto(&spb.Status{Code: int32(codes.Unavailable), Details: []*anypb.Any{shed}})), "x-trace", "t-1")
	p := inventoryPolicy()
	p.Shedding = nil
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	viaContext := func(ctx context.Context) {
		_ = grpc.SetHeader(ctx, md)
		_ = grpc.SendHeader(ctx, md)
		_ = grpc.SetTrailer(ctx, md)
	}
	check := func(t *testing.T, rs *recordingStream) {
		for _, way := range []string{"SetHeader", "SendHeader", "SetTrailer"} {
			if rs.marked(t, way) {
				t.Errorf("%s: the SHED mark reached gRPC's stream", way)
			}
			if v := rs.got[way].Get("x-trace"); len(v) != 1 || v[0] != "t-1" {
				t.Errorf("%s: x-trace %v, want kept", way, v)
			}
		}
	}
	newRecording := func() *recordingStream {
		rs := &recordingStream{got: map[string]metadata.MD{}}
		base, cancel := context.WithTimeout(context.Background(), time.Hour)
		t.Cleanup(cancel)
		rs.ctx = grpc.NewContextWithServerTransportStream(base, rs)
		return rs
	}
	t.Run("unary, through the context", func(t *testing.T) {
		rs := newRecording()
		_, err := g.UnaryInterceptor(rs.ctx, nil, &grpc.UnaryServerInfo{FullMethod: getStock}, func(ctx context.Context, req any) (any, error) {
			viaContext(ctx)
			return req, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
	t.Run("stream, through the context", func(t *testing.T) {
		rs := newRecording()
		err := g.StreamInterceptor(nil, streamRecorder{rs}, &grpc.StreamServerInfo{FullMethod: watchStock, IsServerStream: true}, func(_ any, ss grpc.ServerStream) error {
			viaContext(ss.Context())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
	t.Run("stream, on the stream", func(t *testing.T) {
		rs := newRecording()
		err := g.StreamInterceptor(nil, streamRecorder{rs}, &grpc.StreamServerInfo{FullMethod: watchStock, IsServerStream: true}, func(_ any, ss grpc.ServerStream) error {
			_ = ss.SetHeader(md)
			_ = ss.SendHeader(md)
			ss.SetTrailer(md)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
}
