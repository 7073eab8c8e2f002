package runtime_test

// An attack on the README's Streams ("a panic in any of the stream's
// calls ... the panic goes on to the caller") and Metrics
// (bulkhead_in_use: permits taken by open streams): a client interceptor
// that panics while a stream opens, in its Recv and in its Send leaves no
// permit taken, in the runtime or in the gauge, and each stream is counted
// once.

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk22ePanicky is a client stream wrapped by an interceptor that panics
// in RecvMsg or SendMsg when told to.
type atk22ePanicky struct {
	grpc.ClientStream
	where *atomic.Value
}

func (p *atk22ePanicky) RecvMsg(m any) error {
	if p.where.Load() == "recv" {
		panic("atk22e: recv")
	}
	return p.ClientStream.RecvMsg(m)
}

func (p *atk22ePanicky) SendMsg(m any) error {
	if p.where.Load() == "send" {
		panic("atk22e: send")
	}
	return p.ClientStream.SendMsg(m)
}

func TestAttack22ePanickingStreamInterceptorLeavesTheGaugeAtZero(t *testing.T) {
	atkNoLeak(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &atkEcho{}
	gs := grpc.NewServer()
	desc := echoDesc
	desc.Handler = e.chat
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk.Echo", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{desc}}, e)
	go func() { _ = gs.Serve(lis) }()
	var where atomic.Value
	where.Store("")
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(func(ctx context.Context, d *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
			if where.Load() == "open" {
				panic("atk22e: open")
			}
			cs, err := streamer(ctx, d, cc, method, o...)
			if err != nil {
				return nil, err
			}
			return &atk22ePanicky{ClientStream: cs, where: &where}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
	})
	reg := prometheus.NewRegistry()
	rt, err := runtime.NewClient(&policy.Service{
		Name:     "atk.Echo",
		Bulkhead: &policy.Bulkhead{Permits: 1},
		Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.Unknown, codes.DeadlineExceeded)},
		Methods: []policy.Method{{Name: atkChat, Kind: policy.KindBidiStreaming, Timeout: 5 * time.Second}},
	}, runtime.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	panics := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s: no panic reached the caller", what)
			}
		}()
		f()
	}
	open := func() grpc.ClientStream {
		cs, err := conn.NewStream(context.Background(), &echoDesc, atkChat)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}

	for _, w := range []string{"open", "send", "recv"} {
		panics("a panic in "+w, func() {
			where.Store("")
			if w == "open" {
				where.Store(w)
			}
			cs := open()
			where.Store(w)
			if err := cs.SendMsg(wrapperspb.String("a")); err != nil {
				t.Fatal(err)
			}
			_ = cs.RecvMsg(new(wrapperspb.StringValue))
		})
		where.Store("")
		if n := atkInUse(t, rt, atkChat); n != 0 {
			t.Fatalf("%d permits taken after a panic in %s", n, w)
		}
		if g := atk22eSeries(t, reg)["resilient_client_bulkhead_in_use{bulkhead=shared}"]; g != 0 {
			t.Fatalf("bulkhead_in_use %v after a panic in %s", g, w)
		}
		// A panic is the client's fault: with one outcome enough to open
		// it, the breaker stays closed.
		atkWantBreaker(t, rt, atkChat, runtime.StateClosed, "a panic in "+w)
	}
	// Each panicked stream counted once, under UNKNOWN, as a panicked
	// unary attempt is; a stream read after them works.
	cs := open()
	if err := cs.SendMsg(wrapperspb.String("b")); err != nil {
		t.Fatal(err)
	}
	var m wrapperspb.StringValue
	if err := cs.RecvMsg(&m); err != nil || m.GetValue() != "b" {
		t.Fatalf("got %v, %v", &m, err)
	}
	_ = cs.CloseSend()
	if err := cs.RecvMsg(&m); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNKNOWN,method=Chat}": 3,
		"resilient_client_attempts_total{code=OK,method=Chat}":      1,
	}, "three panics and a stream that answered")
}
