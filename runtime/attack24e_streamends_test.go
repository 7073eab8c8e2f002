package runtime_test

// Attacks on the README's Streams ("What a stream holds, and when it gives
// it back", "Its outcome") and on the Metrics' one count per stream: each
// way a server-streaming, client-streaming and bidirectional stream can
// end, against a real gRPC server on loopback that misbehaves on purpose
// (hangs, sends some messages then UNAVAILABLE, answers trailers-only,
// answers before the client closed its side, sends a message past the
// client's limit, stops reading), with a caller that reads to the end,
// reads to an error, drops the stream, cancels, runs out of deadline in
// Recv or in Send, panics between reads, or reads again after the end.
// After each: the permits taken (0, and exactly one permit: a second
// stream is refused while one is open), the breaker's state (one failure
// opens it), the streams counted in attempts_total (exactly one, under the
// expected code), and the code the caller saw.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
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
	atk24eWatch  = "/atk24e.S/Watch"
	atk24eUpload = "/atk24e.S/Upload"
	atk24eChat   = "/atk24e.S/Chat"
)

var (
	atk24eWatchDesc  = grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
	atk24eUploadDesc = grpc.StreamDesc{StreamName: "Upload", ClientStreams: true}
	atk24eChatDesc   = grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}
)

// atk24eServe is each method's handler: the first message says what the
// server does.
//
//	ok             Watch: three messages, OK; Upload: reads to the end, answers; Chat: echoes to the end
//	some           two messages (Upload: none), then UNAVAILABLE
//	trailers       UNAVAILABLE at once, no header, no message
//	early          answers OK at once (Upload: its response) without reading the rest
//	big            a message past the client's receive limit
//	hang           waits for the caller to give up, reading nothing more
func atk24eServe(kind string) func(any, grpc.ServerStream) error {
	return func(_ any, st grpc.ServerStream) error {
		var first wrapperspb.StringValue
		if err := st.RecvMsg(&first); err != nil {
			return err
		}
		v := first.GetValue()
		switch v {
		case "trailers":
			return status.Error(codes.Unavailable, "injected trailers-only")
		case "hang":
			<-st.Context().Done()
			return st.Context().Err()
		case "big":
			return st.SendMsg(wrapperspb.String(strings.Repeat("x", 64<<10)))
		case "early":
			if kind == "upload" {
				return st.SendMsg(wrapperspb.String("early"))
			}
			return nil
		case "some":
			if kind != "upload" { // a client stream's server has one answer: the error
				for range 2 {
					if err := st.SendMsg(&first); err != nil {
						return err
					}
				}
			}
			return status.Error(codes.Unavailable, "injected after two")
		}
		switch kind {
		case "watch":
			for range 3 {
				if err := st.SendMsg(&first); err != nil {
					return err
				}
			}
			return nil
		case "upload":
			n := 1
			for {
				var m wrapperspb.StringValue
				if err := st.RecvMsg(&m); err == io.EOF {
					return st.SendMsg(wrapperspb.String(strings.Repeat("n", n)))
				} else if err != nil {
					return err
				}
				n++
			}
		}
		if err := st.SendMsg(&first); err != nil {
			return err
		}
		for {
			var m wrapperspb.StringValue
			if err := st.RecvMsg(&m); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if err := st.SendMsg(&m); err != nil {
				return err
			}
		}
	}
}

// atk24eServer serves the three methods on loopback. Its receive windows
// are fixed at 64 KiB (no BDP growth), so that a client sending to a
// server that reads nothing blocks in SendMsg.
func atk24eServer(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
	w, u, c := atk24eWatchDesc, atk24eUploadDesc, atk24eChatDesc
	w.Handler, u.Handler, c.Handler = atk24eServe("watch"), atk24eServe("upload"), atk24eServe("chat")
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk24e.S", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{w, u, c}}, struct{}{})
	return serveAndDial(t, gs, lis, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<10)))
}

// atk24eClient is a runtime of the three methods with one permit each, a
// breaker per method that one failure opens, the given timeout, and its
// own registry.
func atk24eClient(t *testing.T, cc grpc.ClientConnInterface, timeout time.Duration, opts ...runtime.Option) (*runtime.Client, grpc.ClientConnInterface, *prometheus.Registry) {
	t.Helper()
	return atk24eClientCodes(t, cc, timeout, policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded), opts...)
}

// atk24eClientCodes is atk24eClient with the breakers' failure codes given.
func atk24eClientCodes(t *testing.T, cc grpc.ClientConnInterface, timeout time.Duration, failures policy.CodeSet,
	opts ...runtime.Option) (*runtime.Client, grpc.ClientConnInterface, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	var ms []policy.Method
	for _, n := range []struct {
		name string
		kind policy.Kind
	}{{atk24eWatch, policy.KindServerStreaming}, {atk24eUpload, policy.KindClientStreaming}, {atk24eChat, policy.KindBidiStreaming}} {
		ms = append(ms, policy.Method{Name: n.name, Kind: n.kind, Timeout: timeout,
			Bulkhead: &policy.Bulkhead{Permits: 1},
			Breaker: &policy.Breaker{FailureRatio: 1, MinimumCalls: 1, Window: time.Minute, CoolDown: time.Minute, HalfOpenProbes: 1,
				FailureCodes: failures}})
	}
	rt, err := runtime.NewClient(&policy.Service{Name: "atk24e.S", Methods: ms}, append(opts, runtime.WithRegisterer(reg))...)
	if err != nil {
		t.Fatal(err)
	}
	return rt, rt.Conn(cc), reg
}

// atk24eOpen opens method's stream on conn and, for a server stream, sends
// first and closes the sending side as the plain client does; for the
// others it sends first.
func atk24eOpen(ctx context.Context, conn grpc.ClientConnInterface, method, first string) (grpc.ClientStream, error) {
	desc := map[string]*grpc.StreamDesc{atk24eWatch: &atk24eWatchDesc, atk24eUpload: &atk24eUploadDesc, atk24eChat: &atk24eChatDesc}[method]
	cs, err := conn.NewStream(ctx, desc, method)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(wrapperspb.String(first)); err != nil {
		return nil, err
	}
	if method == atk24eWatch {
		if err := cs.CloseSend(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// atk24eRecvAll reads cs until an error and returns it.
func atk24eRecvAll(cs grpc.ClientStream) error {
	for {
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			return err
		}
	}
}

// atk24eAttempts is the count of attempts_total of method, by code.
func atk24eAttempts(t *testing.T, reg *prometheus.Registry, method string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	short := method[strings.LastIndexByte(method, '/')+1:]
	for _, mf := range mfs {
		if mf.GetName() != "resilient_client_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var code, meth string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "code":
					code = l.GetValue()
				case "method":
					meth = l.GetValue()
				}
			}
			if (meth == short || meth == method) && m.GetCounter().GetValue() != 0 {
				out[code] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// atk24eWantExact checks that method's bulkhead of one permit is free (at
// once, or within the wait the ending allows) and holds exactly one: a
// stream opened now goes through, a second beside it is refused, and
// cancelling the first frees it again.
func atk24eWantExact(t *testing.T, rt *runtime.Client, conn grpc.ClientConnInterface, method string) {
	t.Helper()
	atk24eWantExactN(t, rt, conn, method, 1)
}

// atk24eWantExactN is atk24eWantExact for a bulkhead of permits.
func atk24eWantExactN(t *testing.T, rt *runtime.Client, conn grpc.ClientConnInterface, method string, permits int) {
	t.Helper()
	atkWantFree(t, rt, method, "the stream's ending")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	for i := range permits {
		if _, err := conn.NewStream(ctx, desc, method); err != nil {
			t.Fatalf("stream %d of %d after the ending: %v", i+1, permits, err)
		}
	}
	if _, err := conn.NewStream(ctx, desc, method); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Errorf("one stream more than the %d permits: %v, want ErrBulkheadFull (a permit given back twice)", permits, err)
	}
	cancel()
	atkWantFree(t, rt, method, "cancelling the check's streams")
}

type atk24eCase struct {
	name    string
	method  string
	first   string
	timeout time.Duration
	// run plays the caller with the open stream (cs nil when opening
	// failed, with err) and returns the error the caller sees last.
	run func(t *testing.T, ctx context.Context, cancel context.CancelFunc, cs grpc.ClientStream, err error) error
	// callerTimeout, when set, is the caller's own deadline.
	callerTimeout time.Duration
	wantCode      codes.Code    // the caller's
	wantCounted   string        // the code of the one attempt counted
	wantState     runtime.State // the breaker after it
	immediate     bool          // the permit is back as soon as run returns
}

func atk24eCases() []atk24eCase {
	readAll := func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		return atk24eRecvAll(cs)
	}
	closeAndRecv := func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		if err := cs.CloseSend(); err != nil {
			return err
		}
		return cs.RecvMsg(new(wrapperspb.StringValue))
	}
	closeThenRead := func(t *testing.T, ctx context.Context, c context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		if err := cs.CloseSend(); err != nil {
			return err
		}
		return atk24eRecvAll(cs)
	}
	drop := func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
		return err
	}
	cancelIt := func(t *testing.T, _ context.Context, cancel context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		cancel()
		return status.Error(codes.Canceled, "cancelled by the caller")
	}
	cancelInRecv := func(t *testing.T, _ context.Context, cancel context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		return atk24eRecvAll(cs)
	}
	recvAfterEnd := func(t *testing.T, ctx context.Context, c context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		_ = cs.CloseSend()
		if err = atk24eRecvAll(cs); err == nil {
			return err
		}
		for range 3 {
			if e := cs.RecvMsg(new(wrapperspb.StringValue)); e == nil {
				t.Error("RecvMsg after the end returned a message")
			}
			_ = cs.SendMsg(wrapperspb.String("after"))
			_ = cs.CloseSend()
			_, _ = cs.Header()
			_ = cs.Trailer()
		}
		return err
	}
	// sendUntilBlocked sends 8 KiB messages to a server that reads none,
	// until SendMsg fails (the caller's deadline, or the stream's timeout,
	// ends it while gRPC waits on flow control), and never calls RecvMsg.
	sendUntilBlocked := func(t *testing.T, ctx context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		big := wrapperspb.String(strings.Repeat("s", 8<<10))
		for i := 0; ; i++ {
			if err := cs.SendMsg(big); err != nil {
				if i < 8 {
					t.Errorf("SendMsg failed after %d messages, before flow control could block it", i)
				}
				if ctx.Err() == nil && err == io.EOF {
					// the stream's own timeout ended it
					return status.Error(codes.DeadlineExceeded, "the stream's timeout")
				}
				return status.FromContextError(ctx.Err()).Err()
			}
			if i > 10000 {
				t.Fatal("SendMsg never blocked")
			}
		}
	}
	// sendAfterEarly sends until the server that answered early makes
	// SendMsg fail with io.EOF, then drops the stream without RecvMsg.
	sendAfterEarly := func(t *testing.T, ctx context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if err := cs.SendMsg(wrapperspb.String("more")); err != nil {
				if err != io.EOF {
					t.Errorf("SendMsg after the server ended: %v, want io.EOF", err)
				}
				return status.Error(codes.OK, "")
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatal("SendMsg never saw the stream over")
		return nil
	}
	panicking := func(t *testing.T, ctx context.Context, cancel context.CancelFunc, cs grpc.ClientStream, err error) (got error) {
		if err != nil {
			return err
		}
		defer func() {
			if r := recover(); r != "caller's bug" {
				t.Errorf("recovered %v", r)
			}
			got = status.Error(codes.Canceled, "cancelled after the panic")
		}()
		defer cancel() // the caller's deferred cancel runs during the panic
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatalf("first message: %v", err)
		}
		panic("caller's bug")
	}
	// concurrent sends on one goroutine while another reads, as gRPC
	// allows (one of each).
	concurrent := func(t *testing.T, ctx context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if cs.SendMsg(wrapperspb.String("c")) != nil {
					return
				}
			}
			_ = cs.CloseSend()
		}()
		n := 0
		for {
			if err = cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				break
			}
			n++
		}
		wg.Wait()
		if err == io.EOF && n != 51 {
			t.Errorf("read %d messages, want 51", n)
		}
		return err
	}
	const short, long = 300 * time.Millisecond, 30 * time.Second
	var cs []atk24eCase
	for _, m := range []string{atk24eWatch, atk24eUpload, atk24eChat} {
		read := readAll
		if m == atk24eUpload {
			read = closeAndRecv
		} else if m == atk24eChat {
			read = closeThenRead
		}
		cs = append(cs,
			atk24eCase{name: "read to the end", method: m, first: "ok", timeout: long, run: read,
				wantCode: codes.OK, wantCounted: "OK", wantState: runtime.StateClosed, immediate: true},
			atk24eCase{name: "some then UNAVAILABLE", method: m, first: "some", timeout: long, run: read,
				wantCode: codes.Unavailable, wantCounted: map[bool]string{true: "UNAVAILABLE", false: "OK"}[m == atk24eUpload],
				wantState: map[bool]runtime.State{true: runtime.StateOpen, false: runtime.StateClosed}[m == atk24eUpload], immediate: true},
			atk24eCase{name: "trailers-only UNAVAILABLE", method: m, first: "trailers", timeout: long, run: read,
				wantCode: codes.Unavailable, wantCounted: "UNAVAILABLE", wantState: runtime.StateOpen, immediate: true},
			atk24eCase{name: "past the receive limit", method: m, first: "big", timeout: long, run: read,
				wantCode: codes.ResourceExhausted, wantCounted: "RESOURCE_EXHAUSTED", wantState: runtime.StateClosed, immediate: true},
			atk24eCase{name: "hung, dropped", method: m, first: "hang", timeout: short, run: drop,
				wantCode: codes.OK, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen},
			atk24eCase{name: "hung, cancelled", method: m, first: "hang", timeout: long, run: cancelIt,
				wantCode: codes.Canceled, wantCounted: "CANCELLED", wantState: runtime.StateClosed},
			atk24eCase{name: "hung, cancelled while in Recv", method: m, first: "hang", timeout: long, run: cancelInRecv,
				wantCode: codes.Canceled, wantCounted: "CANCELLED", wantState: runtime.StateClosed, immediate: true},
			atk24eCase{name: "hung, caller's deadline in Recv", method: m, first: "hang", timeout: long, run: read, callerTimeout: short,
				wantCode: codes.DeadlineExceeded, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen, immediate: true},
			atk24eCase{name: "hung, own timeout in Recv", method: m, first: "hang", timeout: short, run: read,
				wantCode: codes.DeadlineExceeded, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen, immediate: true},
			atk24eCase{name: "Recv, Send, CloseSend, Header, Trailer after the end", method: m, first: "some", timeout: long, run: recvAfterEnd,
				wantCode: codes.Unavailable, wantCounted: map[bool]string{true: "UNAVAILABLE", false: "OK"}[m == atk24eUpload],
				wantState: map[bool]runtime.State{true: runtime.StateOpen, false: runtime.StateClosed}[m == atk24eUpload], immediate: true},
		)
		if m != atk24eUpload {
			cs = append(cs, atk24eCase{name: "one message read, then dropped", method: m, first: "ok", timeout: short,
				run: func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
					if err != nil {
						return err
					}
					return cs.RecvMsg(new(wrapperspb.StringValue))
				},
				wantCode: codes.OK, wantCounted: "OK", wantState: runtime.StateClosed})
			cs = append(cs, atk24eCase{name: "panic between reads, deferred cancel", method: m, first: "ok", timeout: long, run: panicking,
				wantCode: codes.Canceled, wantCounted: "OK", wantState: runtime.StateClosed})
		}
		if m != atk24eWatch {
			cs = append(cs,
				atk24eCase{name: "CloseSend, then dropped", method: m, first: "hang", timeout: short,
					run: func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream, err error) error {
						if err != nil {
							return err
						}
						return cs.CloseSend()
					},
					wantCode: codes.OK, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen},
				atk24eCase{name: "caller's deadline blocked in Send", method: m, first: "hang", timeout: long, callerTimeout: short, run: sendUntilBlocked,
					wantCode: codes.DeadlineExceeded, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen},
				atk24eCase{name: "own timeout blocked in Send", method: m, first: "hang", timeout: short, run: sendUntilBlocked,
					wantCode: codes.DeadlineExceeded, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen},
				atk24eCase{name: "server answered before the client closed, Send's io.EOF, no Recv", method: m, first: "early", timeout: short, run: sendAfterEarly,
					wantCode: codes.OK, wantCounted: "CANCELLED", wantState: runtime.StateClosed, immediate: true},
			)
		}
		if m == atk24eChat {
			cs = append(cs, atk24eCase{name: "concurrent Send and Recv", method: m, first: "ok", timeout: long, run: concurrent,
				wantCode: codes.OK, wantCounted: "OK", wantState: runtime.StateClosed, immediate: true})
		}
	}
	return cs
}

func TestAttack24eEveryStreamEndingGivesBackOnceAndCountsOnce(t *testing.T) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	for _, observed := range []bool{false, true} {
		for _, c := range atk24eCases() {
			t.Run(fmt.Sprintf("observed=%v/", observed)+atk24eShort(c.method)+"/"+c.name, func(t *testing.T) {
				var events []runtime.Option
				if observed { // the stream then counts its calls in progress (busy)
					events = append(events, runtime.WithObserver(func(runtime.Event) {}))
				}
				rt, conn, reg := atk24eClient(t, cc, c.timeout, events...)
				ctx, cancel := context.WithCancel(context.Background())
				if c.callerTimeout > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), c.callerTimeout)
				}
				defer cancel()
				cs, err := atk24eOpen(ctx, conn, c.method, c.first)
				got := c.run(t, ctx, cancel, cs, err)
				if got == io.EOF {
					got = nil
				}
				if status.Code(got) != c.wantCode {
					t.Errorf("the caller saw %v, want %v", got, c.wantCode)
				}
				if c.immediate {
					if n := atkInUse(t, rt, c.method); n != 0 {
						t.Errorf("%d permits taken as soon as the caller was done", n)
					}
				}
				atkWantFree(t, rt, c.method, c.name)
				atkWaitFor(t, "the stream counted", func() bool { return len(atk24eAttempts(t, reg, c.method)) != 0 })
				time.Sleep(10 * time.Millisecond) // a second count would come now
				if got := atk24eAttempts(t, reg, c.method); len(got) != 1 || got[c.wantCounted] != 1 {
					t.Errorf("attempts_total %v, want one under %s", got, c.wantCounted)
				}
				atkWantBreaker(t, rt, c.method, c.wantState, "breaker %v after the stream, want "+c.wantState.String())
				if c.wantState == runtime.StateClosed {
					atk24eWantExact(t, rt, conn, c.method)
				}
			})
		}
	}
}

func atk24eShort(m string) string { return m[strings.LastIndexByte(m, '/')+1:] }

// The same endings, each of the half-open probe of a breaker only streams
// go through: after it the breaker is open (a failure), closed (a first
// message), or half-open with its probe free again (an ending that says
// nothing), never half-open with the probe still held by a stream that
// is over.
func TestAttack24eEveryStreamEndingOfAProbeFreesIt(t *testing.T) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	for _, observed := range []bool{false, true} {
		for _, c := range atk24eCases() {
			t.Run(fmt.Sprintf("observed=%v/", observed)+atk24eShort(c.method)+"/"+c.name, func(t *testing.T) {
				var events []runtime.Option
				if observed { // the stream then counts its calls in progress (busy)
					events = append(events, runtime.WithObserver(func(runtime.Event) {}))
				}
				clk := newAtkClock()
				rt, conn, reg := atk24eClient(t, cc, c.timeout, append(events, runtime.WithClock(clk))...)
				bg := context.Background()
				fail, err := atk24eOpen(bg, conn, c.method, "trailers")
				if err != nil {
					t.Fatal(err)
				}
				_ = fail.CloseSend()
				if err := atk24eRecvAll(fail); status.Code(err) != codes.Unavailable {
					t.Fatalf("the failing stream: %v, want UNAVAILABLE", err)
				}
				atkWantBreaker(t, rt, c.method, runtime.StateOpen, "breaker %v after a failure, want open")
				clk.Advance(2 * time.Minute)
				ctx, cancel := context.WithCancel(bg)
				if c.callerTimeout > 0 {
					ctx, cancel = context.WithTimeout(bg, c.callerTimeout)
				}
				defer cancel()
				cs, err := atk24eOpen(ctx, conn, c.method, c.first)
				got := c.run(t, ctx, cancel, cs, err)
				if got == io.EOF {
					got = nil
				}
				if status.Code(got) != c.wantCode {
					t.Errorf("the caller saw %v, want %v", got, c.wantCode)
				}
				atkWantFree(t, rt, c.method, c.name)
				atkWaitFor(t, "the probe counted", func() bool { return atk24eAttempts(t, reg, c.method)[c.wantCounted] >= 1 })
				want := runtime.StateHalfOpen
				switch {
				case c.wantState == runtime.StateOpen:
					want = runtime.StateOpen
				case c.wantCounted == "OK":
					want = runtime.StateClosed
				}
				atkWantBreaker(t, rt, c.method, want, "breaker %v after the probe, want "+want.String())
				if want != runtime.StateOpen {
					atk24eWantExact(t, rt, conn, c.method)
				}
			})
		}
	}
}

// A context already over when the stream opens is answered at once with
// its code, before any layer: no permit, no outcome, no count. A message
// past the client's send limit (the request of a server stream, a message
// of the others) ends the stream on the client's side: the permit back at
// once, counted once under RESOURCE_EXHAUSTED, the breaker told nothing.
func TestAttack24eDeadContextAndOversizedSend(t *testing.T) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	for _, m := range []string{atk24eWatch, atk24eUpload, atk24eChat} {
		rt, conn, reg := atk24eClient(t, cc, 30*time.Second)
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel2()
		for _, d := range []struct {
			ctx  context.Context
			code codes.Code
		}{{cancelled, codes.Canceled}, {expired, codes.DeadlineExceeded}} {
			if _, err := atk24eOpen(d.ctx, conn, m, "ok"); status.Code(err) != d.code {
				t.Errorf("%s: a dead context: %v, want %v", atk24eShort(m), err, d.code)
			}
		}
		if n := atkInUse(t, rt, m); n != 0 {
			t.Errorf("%s: %d permits after dead contexts", atk24eShort(m), n)
		}
		if got := atk24eAttempts(t, reg, m); len(got) != 0 {
			t.Errorf("%s: attempts_total %v after dead contexts, want none", atk24eShort(m), got)
		}

		ctx, cancel3 := context.WithCancel(context.Background())
		defer cancel3()
		desc := map[string]*grpc.StreamDesc{atk24eWatch: &atk24eWatchDesc, atk24eUpload: &atk24eUploadDesc, atk24eChat: &atk24eChatDesc}[m]
		cs, err := conn.NewStream(ctx, desc, m, grpc.MaxCallSendMsgSize(1<<10))
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(wrapperspb.String(strings.Repeat("b", 4<<10))); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("%s: an oversized message: %v, want RESOURCE_EXHAUSTED", atk24eShort(m), err)
		}
		if n := atkInUse(t, rt, m); n != 0 {
			t.Errorf("%s: %d permits right after the oversized message", atk24eShort(m), n)
		}
		if got := atk24eAttempts(t, reg, m); len(got) != 1 || got["RESOURCE_EXHAUSTED"] != 1 {
			t.Errorf("%s: attempts_total %v, want one under RESOURCE_EXHAUSTED", atk24eShort(m), got)
		}
		atkWantBreaker(t, rt, m, runtime.StateClosed, atk24eShort(m)+": breaker %v, want closed")
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("%s: Recv after it: %v, want its RESOURCE_EXHAUSTED", atk24eShort(m), err)
		}
		if got := atk24eAttempts(t, reg, m); len(got) != 1 {
			t.Errorf("%s: attempts_total %v after a Recv, want it counted once", atk24eShort(m), got)
		}
		atk24eWantExact(t, rt, conn, m)
	}
}

// A stream whose context ends while it waits for a permit (the bulkhead's
// MaxWait) ends the wait with its context's code, takes no permit and is
// counted nowhere; the holder's permit is still exactly one, and once the
// holder is cancelled the next stream gets it.
func TestAttack24eStreamWhoseContextEndsWaitingForAPermit(t *testing.T) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	reg := prometheus.NewRegistry()
	rt, err := runtime.NewClient(&policy.Service{Name: "atk24e.S", Methods: []policy.Method{{Name: atk24eChat, Kind: policy.KindBidiStreaming,
		Timeout: time.Hour, Bulkhead: &policy.Bulkhead{Permits: 1, MaxWait: 10 * time.Second}}}}, runtime.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	if _, err := atk24eOpen(hctx, conn, atk24eChat, "hang"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name string
		code codes.Code
	}{{"deadline", codes.DeadlineExceeded}, {"cancel", codes.Canceled}} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if d.code == codes.Canceled {
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
		}
		began := time.Now()
		_, err := conn.NewStream(ctx, &atk24eChatDesc, atk24eChat)
		cancel()
		if status.Code(err) != d.code {
			t.Errorf("%s while waiting: %v, want %v", d.name, err, d.code)
		}
		if el := time.Since(began); el > 5*time.Second {
			t.Errorf("%s: the wait lasted %v, past its context", d.name, el)
		}
		if n := atkInUse(t, rt, atk24eChat); n != 1 {
			t.Errorf("%s: %d permits taken, want the holder's 1", d.name, n)
		}
	}
	if got := atk24eAttempts(t, reg, atk24eChat); len(got) != 0 {
		t.Errorf("attempts_total %v before any stream ended, want none", got)
	}
	hcancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.NewStream(ctx, &atk24eChatDesc, atk24eChat); err != nil {
		t.Fatalf("the next stream once the holder was cancelled: %v", err)
	}
	cancel()
	atkWantFree(t, rt, atk24eChat, "the last cancel")
}
