package runtime_test

// Attacks on the README's "Half-open probes" of Streams and on the
// breaker's "a result that arrives after the state changed is not
// counted": a bidirectional stream of a service whose breaker a unary
// method shares, opened before the breaker opened, beside its unary probe,
// and as the first call to find the cool-down over.

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

const (
	atk22eGet  = "/atk.Mixed/Get"
	atk22eChat = "/atk.Mixed/Chat"
)

type atk22eMixed struct {
	atkEcho
	gets atomic.Int32
}

// get answers "fail" with UNAVAILABLE, waits on "hang" for the caller to
// give up, and echoes anything else.
func (x *atk22eMixed) get(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	x.gets.Add(1)
	var m wrapperspb.StringValue
	if err := dec(&m); err != nil {
		return nil, err
	}
	switch m.GetValue() {
	case "fail":
		return nil, status.Error(codes.Unavailable, "injected")
	case "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &m, nil
}

type atk22eChatStream = grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue]

// atk22eMixedClient serves a unary Get and a bidirectional Chat of one
// service whose breaker (two outcomes, half failing, one probe, a cool-down
// of 1 s on clk) both share.
func atk22eMixedClient(t *testing.T, opts ...runtime.Option) (*atk22eMixed, *runtime.Client,
	*runtime.UnaryHandle[wrapperspb.StringValue, wrapperspb.StringValue], *runtime.StreamHandle[atk22eChatStream]) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := &atk22eMixed{}
	gs := grpc.NewServer()
	chat := echoDesc
	chat.Handler = x.chat
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk.Mixed", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: x.get}},
		Streams: []grpc.StreamDesc{chat}}, x)
	cc := serveAndDial(t, gs, lis)
	rt, err := runtime.NewClient(&policy.Service{
		Name:     "atk.Mixed",
		Bulkhead: &policy.Bulkhead{Permits: 8},
		Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: 10 * time.Second, CoolDown: time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)},
		Methods: []policy.Method{
			{Name: atk22eGet, Kind: policy.KindUnary, Timeout: 5 * time.Second},
			{Name: atk22eChat, Kind: policy.KindBidiStreaming, Timeout: 5 * time.Second},
		},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	get, err := runtime.NewUnary(rt, atk22eGet, func(ctx context.Context, in *wrapperspb.StringValue, o ...grpc.CallOption) (*wrapperspb.StringValue, error) {
		out := new(wrapperspb.StringValue)
		return out, conn.Invoke(ctx, atk22eGet, in, out, o...)
	}, runtime.UnaryHooks[wrapperspb.StringValue, wrapperspb.StringValue]{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := runtime.NewStream(rt, atk22eChat, func(ctx context.Context, o ...grpc.CallOption) (atk22eChatStream, error) {
		cs, err := conn.NewStream(ctx, &echoDesc, atk22eChat, o...)
		if err != nil {
			return nil, err
		}
		return &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]{ClientStream: cs}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return x, rt, get, h
}

func TestAttack22eStreamsBesideTheUnaryProbesOfASharedBreaker(t *testing.T) {
	atkNoLeak(t)
	clk := newAtkClock()
	reg := prometheus.NewRegistry()
	var evs atk22eEvents
	x, rt, get, h := atk22eMixedClient(t, runtime.WithClock(clk), runtime.WithRegisterer(reg), runtime.WithObserver(evs.observe))
	ctx := context.Background()
	state := func(want runtime.State, when string) {
		t.Helper()
		atkWantBreaker(t, rt, atk22eChat, want, when)
		atkWantBreaker(t, rt, atk22eGet, want, when)
	}
	open := func(what string) atk22eChatStream {
		t.Helper()
		st, err := h.Call(ctx)
		if err != nil {
			t.Fatalf("opening %s: %v", what, err)
		}
		return st
	}
	fail := func(st atk22eChatStream, what string) {
		t.Helper()
		if err := st.Send(wrapperspb.String("fail")); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: got %v, want UNAVAILABLE", what, err)
		}
	}

	// A stream opened while closed, which will fail only later.
	early := open("a stream while closed")
	for range 2 {
		if _, err := get.Call(ctx, wrapperspb.String("fail")); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v, want UNAVAILABLE", err)
		}
	}
	state(runtime.StateOpen, "two unary failures")
	if _, err := h.Call(ctx); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("a stream while open: got %v, want ErrCircuitOpen", err)
	}

	// After the cool-down a unary call takes the one probe and hangs.
	clk.Advance(time.Second)
	pctx, pcancel := context.WithCancel(ctx)
	probeDone := make(chan error, 1)
	go func() {
		_, err := get.Call(pctx, wrapperspb.String("hang"))
		probeDone <- err
	}()
	atkWaitFor(t, "the unary probe at the server", func() bool { return x.gets.Load() == 3 })
	state(runtime.StateHalfOpen, "the unary probe")
	if _, err := get.Call(ctx, wrapperspb.String("ok")); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("a second unary call beside the probe: got %v, want ErrCircuitOpen", err)
	}

	// A stream beside the probe goes through; its messages close nothing.
	beside := open("a stream beside the unary probe")
	if err := beside.Send(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := beside.Recv(); err != nil {
		t.Fatal(err)
	}
	_ = beside.CloseSend()
	if _, err := beside.Recv(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	state(runtime.StateHalfOpen, "a stream's success beside the probe")

	// The stream opened while closed fails now: it says nothing of the
	// half-open breaker.
	fail(early, "the early stream")
	state(runtime.StateHalfOpen, "the failure of a stream admitted while closed")

	// A stream beside the probe that fails opens the breaker again.
	fail(open("a failing stream beside the probe"), "the failing stream")
	state(runtime.StateOpen, "a stream's failure beside the probe")
	pcancel()
	if err := <-probeDone; status.Code(err) != codes.Canceled {
		t.Fatalf("the cancelled probe: got %v, want CANCELED", err)
	}
	state(runtime.StateOpen, "the probe of the earlier half-open cancelled")

	// A stream is the first to find the cool-down over: it takes the
	// breaker half-open but no probe, so the next unary call is the probe
	// and closes it; the stream's later failure is of the earlier state.
	clk.Advance(time.Second)
	first := open("the first stream after the cool-down")
	state(runtime.StateHalfOpen, "a stream after the cool-down")
	if _, err := get.Call(ctx, wrapperspb.String("ok")); err != nil {
		t.Fatalf("the unary call after a stream took the breaker half-open: %v (the stream holds the probe)", err)
	}
	state(runtime.StateClosed, "the unary probe's success")
	fail(first, "the first stream")
	state(runtime.StateClosed, "the failure of a stream admitted while half-open, after the breaker closed")
	if n := atkInUse(t, rt, atk22eChat); n != 0 {
		t.Fatalf("%d permits taken after every stream ended", n)
	}

	atk22eWantCycle(t, evs.all(), func(runtime.Event) bool { return true })
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=Get}":               2,
		"resilient_client_attempts_total{code=CANCELLED,method=Get}":                 1,
		"resilient_client_attempts_total{code=OK,method=Get}":                        1,
		"resilient_client_attempts_total{code=OK,method=Chat}":                       1,
		"resilient_client_attempts_total{code=UNAVAILABLE,method=Chat}":              3,
		"resilient_client_breaker_rejections_total{method=Get}":                      1,
		"resilient_client_breaker_rejections_total{method=Chat}":                     1,
		"resilient_client_breaker_transitions_total{breaker=shared,state=open}":      2,
		"resilient_client_breaker_transitions_total{breaker=shared,state=half-open}": 2,
		"resilient_client_breaker_transitions_total{breaker=shared,state=closed}":    1,
	}, "the breaker closed")
}

// atk22eWantCycle fails the test unless events are exactly the breaker's
// closed → open → half-open → open → half-open → closed, each a
// transition without an error, and each as also wants it.
func atk22eWantCycle(t *testing.T, events []runtime.Event, also func(runtime.Event) bool) {
	t.Helper()
	want := [][2]runtime.State{
		{runtime.StateClosed, runtime.StateOpen},
		{runtime.StateOpen, runtime.StateHalfOpen},
		{runtime.StateHalfOpen, runtime.StateOpen},
		{runtime.StateOpen, runtime.StateHalfOpen},
		{runtime.StateHalfOpen, runtime.StateClosed},
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
	}
	for i, e := range events {
		if e.Kind != runtime.EventBreakerTransition || e.From != want[i][0] || e.To != want[i][1] || e.Err != nil || !also(e) {
			t.Errorf("event %d: %+v, want %v → %v without an error", i, e, want[i][0], want[i][1])
		}
	}
}
