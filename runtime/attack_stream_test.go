package runtime_test

// Black-box attacks on the README's promise that a stream gives back its
// bulkhead permit (and its breaker ticket) on every ending: the generated
// server stream (WatchStock) and a bidirectional stream opened through a
// runtime.StreamHandle against a real loopback server.

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func atkInUse(t *testing.T, rt *runtime.Client, method string) int {
	t.Helper()
	n, ok := rt.BulkheadInUse(method)
	if !ok {
		t.Fatalf("%s has no bulkhead", method)
	}
	return n
}

func atkWantFree(t *testing.T, rt *runtime.Client, method, after string) {
	t.Helper()
	atkWaitFor(t, "permits free after "+after, func() bool { return atkInUse(t, rt, method) == 0 })
}

// Every ending of the generated WatchStock stream gives its permit back,
// once: reading past the end or past an error never returns a second one.
func TestAttackServerStreamEndingsReturnThePermitOnce(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		atkMethod(p, atkWatchStock).Timeout = 100 * time.Millisecond
		atkMethod(p, atkWatchStock).Bulkhead.MaxWait = 0
	})
	rt := c.Runtime()
	ctx := context.Background()
	req := &inventoryv1.WatchStockRequest{Sku: "apple"}

	// Read to the end, then read again twice.
	st, err := c.WatchStock(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
	}
	if err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	if n := atkInUse(t, rt, atkWatchStock); n != 0 {
		t.Fatalf("%d permits taken right after io.EOF", n)
	}
	for range 2 {
		if _, err := st.Recv(); err == nil {
			t.Fatal("Recv after io.EOF returned a message")
		}
	}

	// An error from Recv, and Recv again after it.
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	st, err = c.WatchStock(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE", err)
	}
	if n := atkInUse(t, rt, atkWatchStock); n != 0 {
		t.Fatalf("%d permits taken right after an error", n)
	}
	_, _ = st.Recv()
	time.Sleep(20 * time.Millisecond) // a stream opened again would arrive now
	if got := fs.Calls(atkWatchStock); got != 2 {
		t.Fatalf("the server saw %d streams, want 2: a stream is never retried", got)
	}

	// Cancelled after opening, never read.
	fs.SetBehaviour(server.Hang)
	cctx, cancel := context.WithCancel(ctx)
	if _, err := c.WatchStock(cctx, req); err != nil {
		t.Fatal(err)
	}
	cancel()
	atkWantFree(t, rt, atkWatchStock, "a cancel before any Recv")

	// Abandoned, never read nor cancelled: the stream's own timeout frees it.
	if _, err := c.WatchStock(ctx, req); err != nil {
		t.Fatal(err)
	}
	atkWantFree(t, rt, atkWatchStock, "the stream's timeout")

	// The count is exact: none of the endings above gave back a permit
	// twice. Four hung streams take the four permits; a fifth is refused.
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	for i := range 4 {
		if _, err := c.WatchStock(hctx, req); err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
	}
	if _, err := c.WatchStock(hctx, req); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("a fifth stream: got %v, want ErrBulkheadFull (a permit was returned twice)", err)
	}
	hcancel()
	atkWantFree(t, rt, atkWatchStock, "cancelling the four")
}

// echoDesc is a bidirectional method served by atkEcho: each message is
// answered with itself, "fail" ends the stream with UNAVAILABLE, "hang"
// waits for the caller to give up.
var echoDesc = grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}

const atkChat = "/atk.Echo/Chat"

type atkEcho struct{ opened atomic.Int32 }

func (e *atkEcho) chat(_ any, st grpc.ServerStream) error {
	e.opened.Add(1)
	for {
		var m wrapperspb.StringValue
		if err := st.RecvMsg(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		switch m.GetValue() {
		case "fail":
			return status.Error(codes.Unavailable, "injected")
		case "hang":
			<-st.Context().Done()
			return st.Context().Err()
		}
		if err := st.SendMsg(&m); err != nil {
			return err
		}
	}
}

// atkChatClient serves atkEcho and returns a handle on its bidirectional
// method under a policy with one permit and a breaker of streams alone
// that judges from minCalls outcomes.
func atkChatClient(t *testing.T, timeout time.Duration, minCalls int, opts ...runtime.Option) (*atkEcho, *runtime.Client,
	*runtime.StreamHandle[grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue]]) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &atkEcho{}
	gs := grpc.NewServer()
	desc := echoDesc
	desc.Handler = e.chat
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk.Echo", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{desc}}, e)
	cc := serveAndDial(t, gs, lis)
	rt, err := runtime.NewClient(&policy.Service{
		Name:     "atk.Echo",
		Bulkhead: &policy.Bulkhead{Permits: 1},
		Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: minCalls, Window: 10 * time.Second, CoolDown: time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)},
		Methods: []policy.Method{{Name: atkChat, Kind: policy.KindBidiStreaming, Timeout: timeout}},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	h, err := runtime.NewStream(rt, atkChat, func(ctx context.Context, o ...grpc.CallOption) (grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue], error) {
		cs, err := conn.NewStream(ctx, &echoDesc, atkChat, o...)
		if err != nil {
			return nil, err
		}
		return &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]{ClientStream: cs}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, rt, h
}

// Every ending of a bidirectional stream gives its one permit back; a
// permit returned twice would let two streams through a bulkhead of one.
func TestAttackBidiStreamEndingsReturnThePermit(t *testing.T) {
	atkNoLeak(t)
	e, rt, h := atkChatClient(t, 150*time.Millisecond, 100)
	ctx := context.Background()
	say := func(st grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue], v string) error {
		return st.Send(wrapperspb.String(v))
	}
	// open opens a stream; with the permit leaked it is refused.
	open := func(ctx context.Context, what string) grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue] {
		t.Helper()
		st, err := h.Call(ctx)
		if err != nil {
			t.Fatalf("opening a stream after %s: %v", what, err)
		}
		return st
	}

	// Send, Recv, CloseSend, Recv to io.EOF, Recv again.
	st := open(ctx, "nothing")
	if err := say(st, "a"); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetValue() != "a" {
		t.Fatalf("got %v, %v", m, err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	if n := atkInUse(t, rt, atkChat); n != 0 {
		t.Fatalf("%d permits taken after io.EOF", n)
	}
	_, _ = st.Recv()

	// The server ends the stream while the client still sends: Send's
	// io.EOF gives the permit back at once, Recv then reads the status.
	st = open(ctx, "io.EOF")
	if err := say(st, "fail"); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 1000 {
		if err = say(st, "more"); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != io.EOF {
		t.Fatalf("Send after the server ended: got %v, want io.EOF", err)
	}
	if n := atkInUse(t, rt, atkChat); n != 0 {
		t.Fatalf("%d permits taken right after Send's io.EOF", n)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv: got %v, want UNAVAILABLE", err)
	}
	_, _ = st.Recv()
	_ = say(st, "after the end")

	// Cancelled between Send and Recv.
	cctx, cancel := context.WithCancel(ctx)
	st = open(cctx, "UNAVAILABLE")
	if err := say(st, "hang"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel: got %v, want CANCELED", err)
	}
	atkWantFree(t, rt, atkChat, "a cancel between Send and Recv")

	// CloseSend, then abandoned: its timeout frees it.
	st = open(ctx, "a cancel")
	if err := say(st, "hang"); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	atkWantFree(t, rt, atkChat, "CloseSend and the stream's timeout")

	// The count is exact: one stream open, a second refused.
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	open(hctx, "the abandoned stream's timeout")
	// The stream reaches the server on its own time: wait for it there, so
	// that the cancel below cannot come first and the count is exact.
	for deadline := time.Now().Add(5 * time.Second); e.opened.Load() < 5 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if _, err := h.Call(hctx); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("a second stream: got %v, want ErrBulkheadFull (a permit was returned twice)", err)
	}
	hcancel()
	atkWantFree(t, rt, atkChat, "the last cancel")
	if got := e.opened.Load(); got != 5 {
		t.Errorf("the server saw %d streams, want 5", got)
	}
}

// atkFailChats opens n Chat streams on h that the server fails with
// UNAVAILABLE, as a breaker needs to open.
func atkFailChats(t *testing.T, h *runtime.StreamHandle[grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue]], n int) {
	t.Helper()
	for range n {
		st, err := h.Call(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(wrapperspb.String("fail"))
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v, want UNAVAILABLE", err)
		}
	}
}

// A breaker that only streams go through is probed by them; a probe that
// its caller cancels frees its place, so the breaker is not wedged
// half-open with its probe gone.
func TestAttackCancelledStreamProbeFreesItsPlace(t *testing.T) {
	atkNoLeak(t)
	clk := newAtkClock()
	_, rt, h := atkChatClient(t, 5*time.Second, 2, runtime.WithClock(clk))
	ctx := context.Background()
	atkFailChats(t, h, 2)
	if s, _ := rt.BreakerState(atkChat); s != runtime.StateOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	if _, err := h.Call(ctx); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("got %v, want ErrCircuitOpen", err)
	}
	if n := atkInUse(t, rt, atkChat); n != 0 {
		t.Fatalf("a refused stream holds %d permits", n)
	}
	clk.Advance(time.Second + time.Millisecond)

	cctx, cancel := context.WithCancel(ctx)
	st, err := h.Call(cctx) // the one probe
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(wrapperspb.String("hang"))
	cancel()
	atkWantFree(t, rt, atkChat, "a cancelled probe")

	st, err = h.Call(ctx)
	if err != nil {
		t.Fatalf("after the probe was cancelled: %v, want the next stream as the probe", err)
	}
	_ = st.Send(wrapperspb.String("ok"))
	if m, err := st.Recv(); err != nil || m.GetValue() != "ok" {
		t.Fatalf("got %v, %v", m, err)
	}
	atkWantBreaker(t, rt, atkChat, runtime.StateClosed, "after the probe's first message the breaker is %v, want closed")
	_ = st.CloseSend()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

// A bidirectional stream's message that does not marshal ends the stream
// on the client's side: the permit goes back at once and, as the only
// half-open probe, it frees its place.
func TestAttackUnsendableBidiMessageFreesPermitAndProbe(t *testing.T) {
	atkNoLeak(t)
	clk := newAtkClock()
	e, rt, h := atkChatClient(t, 5*time.Second, 2, runtime.WithClock(clk))
	ctx := context.Background()
	atkFailChats(t, h, 2)
	clk.Advance(time.Second + time.Millisecond)
	st, err := h.Call(ctx) // the one probe
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(wrapperspb.String("\xff")); err == nil {
		t.Fatal("a message that is not UTF-8 was sent")
	}
	if n := atkInUse(t, rt, atkChat); n != 0 {
		t.Fatalf("%d permits taken after a failed Send", n)
	}
	if s, _ := rt.BreakerState(atkChat); s != runtime.StateHalfOpen {
		t.Fatalf("breaker %v after a client-side failure, want still half-open", s)
	}
	st, err = h.Call(ctx)
	if err != nil {
		t.Fatalf("the next stream: %v, want it as the probe", err)
	}
	_ = st.Send(wrapperspb.String("ok"))
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	_, _ = st.Recv()
	atkWantBreaker(t, rt, atkChat, runtime.StateClosed, "breaker %v, want closed by the probe")
	// The stream whose message failed may or may not have reached the
	// server before gRPC ended it (its headers go ahead of any message).
	if got := e.opened.Load(); got != 3 && got != 4 {
		t.Errorf("the server saw %d streams, want 3 or 4", got)
	}
}

// serveAndDial serves gs on lis, dials it over loopback with opts, and
// closes both at the test's end.
func serveAndDial(t *testing.T, gs *grpc.Server, lis net.Listener, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	go func() { _ = gs.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
	})
	return cc
}
