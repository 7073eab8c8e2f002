package runtime_test

// An attack on the README's Streams, "io.EOF from Send" and "Header
// answering (nil, nil)": the permit goes back at once, and "the outcome
// waits for Recv (which returns the status) or the context's end". A
// caller that returns on Send's io.EOF, or stops at a Header of (nil,
// nil), never calls Recv: the outcome is then told at the stream's
// timeout, and was told as DEADLINE_EXCEEDED, a failure, whatever the
// server answered: a healthy server that ends its streams early (it has
// what it needs, it answers OK) opened the breaker of its callers. It is
// now told as nothing, counted under CANCELLED, as when the caller cancels.

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
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

const atk22eDone = "/atk.Done/Chat"

// atk22eDoneClient serves a bidirectional method whose streams handler
// serves (nil: each ends at once with OK), under a breaker only its streams go through (two
// outcomes, half failing) and a stream timeout of timeout.
func atk22eDoneClient(t *testing.T, timeout time.Duration, handler grpc.StreamHandler, opts ...runtime.Option) (*atomic.Int32, *runtime.Client, *runtime.StreamHandle[atk22eChatStream]) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int32
	gs := grpc.NewServer()
	desc := echoDesc
	desc.Handler = func(srv any, st grpc.ServerStream) error {
		opened.Add(1)
		if handler != nil {
			return handler(srv, st)
		}
		return nil
	}
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk.Done", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{desc}}, &opened)
	cc := serveAndDial(t, gs, lis)
	rt, err := runtime.NewClient(&policy.Service{
		Name:     "atk.Done",
		Bulkhead: &policy.Bulkhead{Permits: 4},
		Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: 10 * time.Second, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)},
		Methods: []policy.Method{{Name: atk22eDone, Kind: policy.KindBidiStreaming, Timeout: timeout}},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	h, err := runtime.NewStream(rt, atk22eDone, func(ctx context.Context, o ...grpc.CallOption) (atk22eChatStream, error) {
		cs, err := conn.NewStream(ctx, &echoDesc, atk22eDone, o...)
		if err != nil {
			return nil, err
		}
		return &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]{ClientStream: cs}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &opened, rt, h
}

func TestAttack22eStreamsAHealthyServerEndedDoNotOpenTheBreakerAtTheirTimeout(t *testing.T) {
	atkNoLeak(t)
	reg := prometheus.NewRegistry()
	// The streams' timeout is long enough that the last stream's Recv
	// follows its Header well within it on a loaded machine (at 100 ms it
	// once came after, and read the deadline); the test waits for the
	// first two timeouts' counts, not for a fixed time.
	opened, rt, h := atk22eDoneClient(t, 500*time.Millisecond, nil, runtime.WithRegisterer(reg))
	ctx := context.Background()

	// One caller sends until io.EOF and returns on it, as many do.
	st, err := h.Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2000 {
		if err = st.Send(wrapperspb.String("x")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != io.EOF {
		t.Fatalf("Send after the server ended the stream: got %v, want io.EOF", err)
	}
	// Another reads the header first and stops at (nil, nil).
	st, err = h.Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md, err := st.Header(); md != nil || err != nil {
		t.Fatalf("Header of a stream over at once: %v, %v; want nil, nil", md, err)
	}
	st = nil
	atkWantFree(t, rt, atk22eDone, "the two streams the server ended")

	// Both timeouts pass; the server answered OK twice.
	atkWaitFor(t, "both streams' timeouts counted", func() bool {
		return atk22eSeries(t, reg)["resilient_client_attempts_total{code=CANCELLED,method=Chat}"] == 2
	})
	if got := opened.Load(); got != 2 {
		t.Fatalf("the server saw %d streams, want 2", got)
	}
	if s, _ := rt.BreakerState(atk22eDone); s != runtime.StateClosed {
		t.Fatalf("breaker %v after two streams the server answered OK: their timeouts were told as failures", s)
	}
	// Each is counted once, as a stream its caller cancelled is: under
	// CANCELLED, telling the breaker nothing.
	want := map[string]float64{"resilient_client_attempts_total{code=CANCELLED,method=Chat}": 2}
	atk22eWantSeries(t, reg, want, "the timeouts of two streams the server ended with OK")

	// A caller that reads the status after Header's (nil, nil) has it
	// counted as it is.
	st, err = h.Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md, err := st.Header(); md != nil || err != nil {
		t.Fatalf("Header of a stream over at once: %v, %v; want nil, nil", md, err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("Recv after Header's (nil, nil): got %v, want io.EOF", err)
	}
	want["resilient_client_attempts_total{code=OK,method=Chat}"] = 1
	atk22eWantSeries(t, reg, want, "a stream read to its status")
}

// A Header that waits on a server that never sends one is woken by the
// context's end with (nil, nil), as for a stream the server ended: that
// is still the deadline's doing, a failure at the stream's timeout, and
// a cancel's, nothing. The permit is back when Header returns.
func TestAttack22eHeaderWokenByTheContextIsNotAStreamTheServerEnded(t *testing.T) {
	atkNoLeak(t)
	reg := prometheus.NewRegistry()
	// The server holds its streams without ending them at the deadline
	// it was sent: ended so, before the client's own timer fires, the
	// stream would be one the server ended.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	_, rt, h := atk22eDoneClient(t, 100*time.Millisecond, func(any, grpc.ServerStream) error { <-release; return nil },
		runtime.WithRegisterer(reg))
	ctx := context.Background()
	// sent runs once the stream is open and its message sent, before
	// Header: a cancel timed from there falls in Header, not in the
	// wait for a ready connection (on a loaded machine it did).
	wait := func(ctx context.Context, sent func()) {
		t.Helper()
		st, err := h.Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(wrapperspb.String("hang")); err != nil {
			t.Fatal(err)
		}
		sent()
		if md, err := st.Header(); md != nil || err != nil {
			t.Fatalf("Header woken by the context: %v, %v; want nil, nil", md, err)
		}
		if n := atkInUse(t, rt, atk22eDone); n != 0 {
			t.Fatalf("%d permits taken when Header returned", n)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	wait(cctx, func() { time.AfterFunc(20*time.Millisecond, cancel) })
	atkWaitFor(t, "the cancelled stream counted", func() bool {
		return atk22eSeries(t, reg)["resilient_client_attempts_total{code=CANCELLED,method=Chat}"] == 1
	})
	atkWantBreaker(t, rt, atk22eDone, runtime.StateClosed, "a cancel during Header")

	wait(ctx, func() {})
	wait(ctx, func() {})
	atkWaitFor(t, "the two timeouts counted", func() bool {
		return atk22eSeries(t, reg)["resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=Chat}"] == 2
	})
	atkWantBreaker(t, rt, atk22eDone, runtime.StateOpen, "two streams timed out waiting on Header")
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=CANCELLED,method=Chat}":           1,
		"resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=Chat}":   2,
		"resilient_client_breaker_state{breaker=shared}":                        2,
		"resilient_client_breaker_transitions_total{breaker=shared,state=open}": 1,
	}, "two timeouts and a cancel during Header")
}

// A half-open probe of a breaker only streams go through, ended at once
// with OK by a healthy server and dropped on Send's io.EOF, frees its
// place at its timeout without opening the breaker again; the next stream
// probes and closes it. Before, the probe's timeout opened the breaker for
// another cool-down.
func TestAttack22eAProbeTheServerEndedDoesNotReopenAtItsTimeout(t *testing.T) {
	atkNoLeak(t)
	var failing atomic.Bool
	failing.Store(true)
	clk := newAtkClock()
	_, rt, h := atk22eDoneClient(t, 100*time.Millisecond, func(any, grpc.ServerStream) error {
		if failing.Load() {
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	}, runtime.WithClock(clk))
	ctx := context.Background()
	for range 2 {
		st, err := h.Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v, want UNAVAILABLE", err)
		}
	}
	atkWantBreaker(t, rt, atk22eDone, runtime.StateOpen, "two failed streams")

	failing.Store(false)
	clk.Advance(time.Minute)
	st, err := h.Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2000 {
		if err = st.Send(wrapperspb.String("x")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != io.EOF {
		t.Fatalf("Send after the server ended the probe: got %v, want io.EOF", err)
	}
	st = nil
	atkWantBreaker(t, rt, atk22eDone, runtime.StateHalfOpen, "the probe dropped on Send's io.EOF")
	// Until its timeout the probe holds its place; then it is free.
	var next atk22eChatStream
	atkWaitFor(t, "the dropped probe's place free", func() bool {
		next, err = h.Call(ctx)
		return err == nil
	})
	atkWantBreaker(t, rt, atk22eDone, runtime.StateHalfOpen, "the dropped probe's timeout")
	_ = next.CloseSend()
	if _, err := next.Recv(); err != io.EOF {
		t.Fatalf("the next probe: got %v, want io.EOF", err)
	}
	atkWantBreaker(t, rt, atk22eDone, runtime.StateClosed, "the next probe read to its OK")
}
