package runtime_test

// Attacks on the README's Streams (Semantics): "What a stream holds, and
// when it gives it back", "Its outcome", the stream's bound, and what the
// Metrics and grpc.OnFinish say of a stream, on endings the earlier
// matrices (attack24e_streamends_test.go, attack22e_*, attack_stream_*)
// do not play: a server that sends its header and then hangs (the caller
// stopping at Header, reading to its timeout, or cancelling with no call
// in progress), a header and an OK with no message, a first message that
// does not unmarshal, a good message and then one that does not, the
// caller's deadline or cancel between two RecvMsg calls after a first
// message, a connection cut in the middle of a message, and a storm of
// such streams abandoned at once. After each: the caller's code, the
// permit back (a second stream goes through a bulkhead of one, a third
// beside it does not), bulkhead_in_use at 0, one count in attempts_total
// under the code the README's classification gives, the breaker's state
// (answer or failure), grpc.OnFinish run once with the caller's result,
// and no goroutine left (atkNoLeak).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

const (
	atk26bGet    = "/atk26b.S/Get"
	atk26bWatch  = "/atk26b.S/Watch"
	atk26bUpload = "/atk26b.S/Upload"
	atk26bChat   = "/atk26b.S/Chat"
)

var atk26bDescs = map[string]*grpc.StreamDesc{
	atk26bWatch:  {StreamName: "Watch", ServerStreams: true},
	atk26bUpload: {StreamName: "Upload", ClientStreams: true},
	atk26bChat:   {StreamName: "Chat", ServerStreams: true, ClientStreams: true},
}

var atk26bStreams = []string{atk26bWatch, atk26bUpload, atk26bChat}

// atk26bUnparsable is a message whose bytes a wrapperspb.StringValue does
// not unmarshal: field 1 with the wire type of a string, not UTF-8.
var atk26bUnparsable = &wrapperspb.BytesValue{Value: []byte{0xff, 0xfe}}

// atk26bServe is a stream handler; the first message says what it does.
//
//	hdrhang   sends its header, then waits for the caller to give up
//	hdrok     sends its header, then ends OK without a message
//	badmsg    its first message (Upload: its response) does not unmarshal
//	goodbad   a message, then one that does not unmarshal
//	onehang   a message, then waits for the caller to give up
//	unavail   UNAVAILABLE at once
//	big       a 4 MiB message
//	smallbig  a message, then a 4 MiB one
//	(other)   echoes it, then every message until the client closes (Upload: answers at the end)
func atk26bServe(_ any, st grpc.ServerStream) error {
	var first wrapperspb.StringValue
	if err := st.RecvMsg(&first); err != nil {
		return err
	}
	big := wrapperspb.String(strings.Repeat("b", 4<<20))
	switch first.GetValue() {
	case "hdrhang":
		if err := st.SendHeader(metadata.Pairs("atk26b", "header")); err != nil {
			return err
		}
		<-st.Context().Done()
		return st.Context().Err()
	case "hdrok":
		return st.SendHeader(metadata.Pairs("atk26b", "header"))
	case "badmsg":
		return st.SendMsg(atk26bUnparsable)
	case "goodbad":
		if err := st.SendMsg(&first); err != nil {
			return err
		}
		return st.SendMsg(atk26bUnparsable)
	case "onehang":
		if err := st.SendMsg(&first); err != nil {
			return err
		}
		<-st.Context().Done()
		return st.Context().Err()
	case "unavail":
		return status.Error(codes.Unavailable, "atk26b: injected")
	case "big":
		return st.SendMsg(big)
	case "smallbig":
		if err := st.SendMsg(&first); err != nil {
			return err
		}
		return st.SendMsg(big)
	}
	upload := false
	if info, ok := grpc.MethodFromServerStream(st); ok {
		upload = info == atk26bUpload
	}
	if !upload {
		if err := st.SendMsg(&first); err != nil {
			return err
		}
	}
	for {
		var m wrapperspb.StringValue
		if err := st.RecvMsg(&m); err == io.EOF {
			if upload {
				return st.SendMsg(&first)
			}
			return nil
		} else if err != nil {
			return err
		}
		if !upload {
			if err := st.SendMsg(&m); err != nil {
				return err
			}
		}
	}
}

// atk26bGetHandler is the unary Get: "unavail" fails UNAVAILABLE, "bad"
// answers with a message that does not unmarshal, any other request is
// echoed.
func atk26bGetHandler(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var in wrapperspb.StringValue
	if err := dec(&in); err != nil {
		return nil, err
	}
	switch in.GetValue() {
	case "unavail":
		return nil, status.Error(codes.Unavailable, "atk26b: injected")
	case "bad":
		return atk26bUnparsable, nil
	}
	return &in, nil
}

// atk26bGRPCServer is the server of atk26b.S, not yet serving.
func atk26bGRPCServer() *grpc.Server {
	gs := grpc.NewServer()
	var ss []grpc.StreamDesc
	for _, m := range atk26bStreams {
		d := *atk26bDescs[m]
		d.Handler = atk26bServe
		ss = append(ss, d)
	}
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk26b.S", HandlerType: (*any)(nil), Streams: ss,
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: atk26bGetHandler}}}, struct{}{})
	return gs
}

// atk26bServer serves atk26b.S on loopback and dials it, with a receive
// limit large enough for the big messages.
func atk26bServer(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveAndDial(t, atk26bGRPCServer(), lis, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
}

// atk26bClientWith is a runtime of atk26b.S: each method with a bulkhead
// of one permit and a breaker of its own that one failure opens, the
// timeout given, edit applied, its own registry.
func atk26bClientWith(t *testing.T, cc grpc.ClientConnInterface, timeout time.Duration, edit func(*policy.Service),
	opts ...runtime.Option) (*runtime.Client, grpc.ClientConnInterface, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p := &policy.Service{Name: "atk26b.S"}
	for _, n := range []struct {
		name string
		kind policy.Kind
	}{{atk26bGet, policy.KindUnary}, {atk26bWatch, policy.KindServerStreaming}, {atk26bUpload, policy.KindClientStreaming}, {atk26bChat, policy.KindBidiStreaming}} {
		p.Methods = append(p.Methods, policy.Method{Name: n.name, Kind: n.kind, Timeout: timeout,
			Bulkhead: &policy.Bulkhead{Permits: 1},
			Breaker: &policy.Breaker{FailureRatio: 1, MinimumCalls: 1, Window: time.Minute, CoolDown: time.Minute, HalfOpenProbes: 1,
				FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}})
	}
	if edit != nil {
		edit(p)
	}
	rt, err := runtime.NewClient(p, append(opts, runtime.WithRegisterer(reg))...)
	if err != nil {
		t.Fatal(err)
	}
	return rt, rt.Conn(cc), reg
}

// atk26bOpen opens method's stream with opts and sends first; a server
// stream then closes its sending side, as the plain client does.
func atk26bOpen(ctx context.Context, conn grpc.ClientConnInterface, method, first string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := conn.NewStream(ctx, atk26bDescs[method], method, opts...)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(wrapperspb.String(first)); err != nil {
		return nil, err
	}
	if method == atk26bWatch {
		if err := cs.CloseSend(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// atk26bInUse is bulkhead_in_use of method's own bulkhead.
func atk26bInUse(t *testing.T, reg *prometheus.Registry, method string) float64 {
	t.Helper()
	return metricValue(t, reg, "resilient_client_bulkhead_in_use", "bulkhead", atk24eShort(method))
}

// atk26bFinished waits for f's callback to have run, then checks that it
// ran once, with an error of code want.
func atk26bFinished(t *testing.T, f *attack22aFinishes, what string, want codes.Code) {
	t.Helper()
	atkWaitFor(t, what+": OnFinish run", func() bool { return len(f.got()) != 0 })
	time.Sleep(10 * time.Millisecond) // a second run would come now
	f.wantOnce(t, what, want)
}

type atk26bCase struct {
	name    string
	methods []string
	first   string
	timeout time.Duration
	// callerTimeout, when set, is the caller's own deadline.
	callerTimeout time.Duration
	// run plays the caller with the open stream and returns the last
	// error the caller saw (nil: none, or io.EOF).
	run         func(t *testing.T, ctx context.Context, cancel context.CancelFunc, cs grpc.ClientStream) error
	wantCode    codes.Code // the caller's
	wantCounted string     // the one count of attempts_total
	wantState   runtime.State
	wantFinish  codes.Code // what OnFinish is run with
	immediate   bool       // the permit is back as soon as run returns
}

// atk26bRecvAll reads cs until an error and returns it (nil for io.EOF),
// the header read first.
func atk26bRecvAll(t *testing.T, cs grpc.ClientStream) error {
	for {
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func atk26bCases() []atk26bCase {
	// short leaves the header or first message of a loopback server time
	// to come before it under -race on a loaded 2-core machine (at 100 ms,
	// a first message came after the caller's deadline in CI).
	const short, long = 300 * time.Millisecond, 30 * time.Second
	all, answering := atk26bStreams, []string{atk26bWatch, atk26bChat}
	header := func(t *testing.T, cs grpc.ClientStream) {
		t.Helper()
		md, err := cs.Header()
		if err != nil || len(md.Get("atk26b")) != 1 {
			t.Fatalf("Header: %v, %v; want the server's header", md, err)
		}
	}
	finishSending := func(t *testing.T, cs grpc.ClientStream) {
		t.Helper()
		if err := cs.CloseSend(); err != nil {
			t.Fatalf("CloseSend: %v", err)
		}
	}
	read := func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream) error {
		finishSending(t, cs)
		return atk26bRecvAll(t, cs)
	}
	return []atk26bCase{
		{name: "header, then hung: the caller stops at Header and drops it", methods: all, first: "hdrhang", timeout: short,
			run: func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream) error {
				header(t, cs)
				return nil
			},
			wantCode: codes.OK, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen, wantFinish: codes.DeadlineExceeded},
		{name: "header, then hung: Recv to the stream's timeout", methods: all, first: "hdrhang", timeout: short,
			run: func(t *testing.T, ctx context.Context, c context.CancelFunc, cs grpc.ClientStream) error {
				header(t, cs)
				return read(t, ctx, c, cs)
			},
			wantCode: codes.DeadlineExceeded, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen,
			wantFinish: codes.DeadlineExceeded, immediate: true},
		{name: "header, then hung: the caller's deadline between Header and Recv", methods: all, first: "hdrhang", timeout: long, callerTimeout: short,
			run: func(t *testing.T, ctx context.Context, _ context.CancelFunc, cs grpc.ClientStream) error {
				header(t, cs)
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond) // no call in progress when it passed
				return cs.RecvMsg(new(wrapperspb.StringValue))
			},
			wantCode: codes.DeadlineExceeded, wantCounted: "DEADLINE_EXCEEDED", wantState: runtime.StateOpen,
			wantFinish: codes.DeadlineExceeded, immediate: true},
		{name: "header, then hung: cancelled after Header, no call in progress", methods: all, first: "hdrhang", timeout: long,
			run: func(t *testing.T, _ context.Context, cancel context.CancelFunc, cs grpc.ClientStream) error {
				header(t, cs)
				cancel()
				return status.Error(codes.Canceled, "cancelled")
			},
			wantCode: codes.Canceled, wantCounted: "CANCELLED", wantState: runtime.StateClosed, wantFinish: codes.Canceled},
		{name: "header, then OK without a message", methods: answering, first: "hdrok", timeout: long,
			run: func(t *testing.T, ctx context.Context, c context.CancelFunc, cs grpc.ClientStream) error {
				header(t, cs)
				return read(t, ctx, c, cs)
			},
			wantCode: codes.OK, wantCounted: "OK", wantState: runtime.StateClosed, wantFinish: codes.OK, immediate: true},
		// gRPC's own INTERNAL "cardinality violation": an answer, as for a
		// unary call whose server sent no response.
		{name: "header, then OK without the response", methods: []string{atk26bUpload}, first: "hdrok", timeout: long,
			run: func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream) error {
				header(t, cs)
				finishSending(t, cs)
				return cs.RecvMsg(new(wrapperspb.StringValue))
			},
			wantCode: codes.Internal, wantCounted: "INTERNAL", wantState: runtime.StateClosed, wantFinish: codes.Internal, immediate: true},
		{name: "the first message does not unmarshal", methods: all, first: "badmsg", timeout: long, run: read,
			wantCode: codes.Internal, wantCounted: "INTERNAL", wantState: runtime.StateClosed, wantFinish: codes.Internal, immediate: true},
		{name: "a message, then one that does not unmarshal", methods: answering, first: "goodbad", timeout: long, run: read,
			wantCode: codes.Internal, wantCounted: "OK", wantState: runtime.StateClosed, wantFinish: codes.Internal, immediate: true},
		{name: "a message, then the caller's deadline between two Recv", methods: answering, first: "onehang", timeout: long, callerTimeout: short,
			run: func(t *testing.T, ctx context.Context, _ context.CancelFunc, cs grpc.ClientStream) error {
				if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					t.Fatalf("first message: %v", err)
				}
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond)
				return cs.RecvMsg(new(wrapperspb.StringValue))
			},
			wantCode: codes.DeadlineExceeded, wantCounted: "OK", wantState: runtime.StateClosed, wantFinish: codes.DeadlineExceeded, immediate: true},
		{name: "a message, then cancelled between two Recv", methods: answering, first: "onehang", timeout: long,
			run: func(t *testing.T, _ context.Context, cancel context.CancelFunc, cs grpc.ClientStream) error {
				if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					t.Fatalf("first message: %v", err)
				}
				cancel()
				return cs.RecvMsg(new(wrapperspb.StringValue))
			},
			wantCode: codes.Canceled, wantCounted: "OK", wantState: runtime.StateClosed, wantFinish: codes.Canceled, immediate: true},
		{name: "a message, then the caller never reads again nor cancels", methods: answering, first: "onehang", timeout: short,
			run: func(t *testing.T, _ context.Context, _ context.CancelFunc, cs grpc.ClientStream) error {
				return cs.RecvMsg(new(wrapperspb.StringValue))
			},
			wantCode: codes.OK, wantCounted: "OK", wantState: runtime.StateClosed, wantFinish: codes.DeadlineExceeded},
	}
}

// TestAttack26BStreamEndingsNothingElsePlays runs each case on each of its
// methods, without an observer.
func TestAttack26BStreamEndingsNothingElsePlays(t *testing.T) { atk26bEndings(t, false) }

// TestAttack26BStreamEndingsNothingElsePlaysObserved runs them with an
// observer: the stream then counts its calls in progress, and its
// context's end may be left to them.
func TestAttack26BStreamEndingsNothingElsePlaysObserved(t *testing.T) { atk26bEndings(t, true) }

func atk26bEndings(t *testing.T, observed bool) {
	atkNoLeak(t)
	cc := atk26bServer(t)
	{
		for _, c := range atk26bCases() {
			for _, m := range c.methods {
				t.Run(fmt.Sprintf("observed=%v/%s/%s", observed, atk24eShort(m), c.name), func(t *testing.T) {
					var opts []runtime.Option
					if observed {
						opts = append(opts, runtime.WithObserver(func(runtime.Event) {}))
					}
					rt, conn, reg := atk26bClientWith(t, cc, c.timeout, nil, opts...)
					ctx, cancel := context.WithCancel(context.Background())
					if c.callerTimeout > 0 {
						ctx, cancel = context.WithTimeout(context.Background(), c.callerTimeout)
					}
					defer cancel()
					var f attack22aFinishes
					cs, err := atk26bOpen(ctx, conn, m, c.first, f.option())
					if err != nil {
						t.Fatalf("opening: %v", err)
					}
					got := c.run(t, ctx, cancel, cs)
					if status.Code(got) != c.wantCode {
						t.Errorf("the caller saw %v, want %v", got, c.wantCode)
					}
					if c.immediate {
						if n := atkInUse(t, rt, m); n != 0 {
							t.Errorf("%d permits still taken when the caller's last call returned, want 0 (README: given back at once)", n)
						}
					}
					atkWantFree(t, rt, m, c.name)
					if g := atk26bInUse(t, reg, m); g != 0 {
						t.Errorf("bulkhead_in_use %v once the permit is back, want 0", g)
					}
					atkWaitFor(t, "the stream counted", func() bool { return len(atk24eAttempts(t, reg, m)) != 0 })
					atk26bFinished(t, &f, c.name, c.wantFinish)
					if got := atk24eAttempts(t, reg, m); len(got) != 1 || got[c.wantCounted] != 1 {
						t.Errorf("attempts_total %v, want exactly one, under %s (README: counted once, at the first message or at its end)", got, c.wantCounted)
					}
					if got := atk24eDurations(t, reg, atk24eShort(m)); got != 1 {
						t.Errorf("attempt_duration_seconds has %d samples, want 1", got)
					}
					atkWantBreaker(t, rt, m, c.wantState, "breaker %v after the stream, want "+c.wantState.String())
					if c.wantState == runtime.StateClosed {
						atk24eWantExact(t, rt, conn, m)
					}
				})
			}
		}
	}
}

// TestAttack26BOnFinishOfAServerStreamEndedBeforeItIsReturned: README,
// Streams: "A server stream's nil request (the handle refuses it first;
// hand-written code calling the plain client on Client.Conn does not)
// ends the stream instead", and an error from CloseSend ("The generated
// server-streaming method calls CloseSend after sending the request and
// returns that error without the stream"); Retries and the retry budget:
// "A caller's grpc.OnFinish callback runs once per call, with the error
// the caller gets". The plain generated WatchStock on Client.Conn given a
// nil request, and the generated client's over an interceptor whose
// CloseSend fails (INTERNAL): the caller gets INVALID_ARGUMENT, INTERNAL,
// and no stream; the callback must run once with that. Before, it ran
// with the CANCELLED gRPC ended its stream with when the runtime cancelled
// it.
func TestAttack26BOnFinishOfAServerStreamEndedBeforeItIsReturned(t *testing.T) {
	atkNoLeak(t)
	wantCallers := func(t *testing.T, f *attack22aFinishes, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Fatalf("WatchStock: %v, want %v", err, want)
		}
		atkWaitFor(t, "OnFinish run", func() bool { return len(f.got()) != 0 })
		time.Sleep(10 * time.Millisecond)
		got := f.got()
		if len(got) != 1 || status.Code(got[0]) != want {
			cs := make([]string, len(got))
			for i, e := range got {
				cs[i] = status.Code(e).String()
			}
			t.Errorf("README (Retries and the retry budget): OnFinish runs once \"with the error the caller gets\"; "+
				"the caller got %v, OnFinish ran %d time(s) with %v (%v)", status.Code(err), len(got), cs, got)
		}
	}
	t.Run("nil request on Client.Conn", func(t *testing.T) {
		srv, cc := startFault(t, nil)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
		plain := inventoryv1.NewInventoryServiceClient(c.Runtime().Conn(cc))
		var f attack22aFinishes
		_, err := plain.WatchStock(context.Background(), nil, f.option())
		wantCallers(t, &f, err, codes.InvalidArgument)
		atkWantFree(t, c.Runtime(), atkWatchStock, "the nil request")
		if n := srv.Calls(atkWatchStock); n != 0 {
			t.Errorf("the server saw %d WatchStock, want none", n)
		}
	})
	t.Run("CloseSend fails", func(t *testing.T) {
		var armed atomic.Bool
		c := attack21aCloseSendClient(t, &armed, true)
		armed.Store(true)
		var f attack22aFinishes
		_, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}, f.option())
		armed.Store(false)
		wantCallers(t, &f, err, codes.Internal)
		atkWantFree(t, c.Runtime(), atkWatchStock, "the failed CloseSend")
	})
}

// TestAttack26BUnmarshalFailureIsJudgedAsAUnaryAttemptIs: README, Its
// outcome: a stream's outcome is "classified as a unary attempt is". A
// response that does not unmarshal ends a unary call with gRPC's INTERNAL
// "failed to unmarshal"; a stream whose first message does not unmarshal
// ends so too. As the half-open probe of a breaker of its own (a unary
// method's, and a stream-only breaker's), each must leave it in the same
// state, counted under the same code.
func TestAttack26BUnmarshalFailureIsJudgedAsAUnaryAttemptIs(t *testing.T) {
	atkNoLeak(t)
	cc := atk26bServer(t)
	clk := newAtkClock()
	rt, conn, reg := atk26bClientWith(t, cc, 30*time.Second, nil, runtime.WithClock(clk))
	get := atk26bGetHandle(t, rt, conn)
	ctx := context.Background()
	if _, err := get.Call(ctx, wrapperspb.String("unavail")); status.Code(err) != codes.Unavailable {
		t.Fatalf("Get unavail: %v", err)
	}
	for _, m := range atk26bStreams {
		cs, err := atk26bOpen(ctx, conn, m, "unavail")
		if err == nil {
			_ = cs.CloseSend()
			err = atk26bRecvAll(t, cs)
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s unavail: %v", atk24eShort(m), err)
		}
	}
	for _, m := range append([]string{atk26bGet}, atk26bStreams...) {
		atkWantBreaker(t, rt, m, runtime.StateOpen, atk24eShort(m)+": breaker %v after a failure, want open")
	}
	clk.Advance(2 * time.Minute)
	_, uerr := get.Call(ctx, wrapperspb.String("bad"))
	if status.Code(uerr) != codes.Internal {
		t.Fatalf("Get bad: %v, want INTERNAL", uerr)
	}
	unaryState, _ := rt.BreakerState(atk26bGet)
	unaryCounts := atk24eAttempts(t, reg, atk26bGet)
	for _, m := range atk26bStreams {
		cs, err := atk26bOpen(ctx, conn, m, "badmsg")
		if err == nil {
			_ = cs.CloseSend()
			err = atk26bRecvAll(t, cs)
		}
		if status.Code(err) != status.Code(uerr) {
			t.Errorf("%s: the probe stream saw %v, the unary probe %v", atk24eShort(m), err, uerr)
		}
		atkWantFree(t, rt, m, "the probe")
		if s, _ := rt.BreakerState(m); s != unaryState {
			t.Errorf("%s: breaker %v after a probe whose message did not unmarshal; the unary probe left %v", atk24eShort(m), s, unaryState)
		}
		if got := atk24eAttempts(t, reg, m); got["INTERNAL"] != unaryCounts["INTERNAL"] {
			t.Errorf("%s: attempts_total %v; the unary method's %v", atk24eShort(m), got, unaryCounts)
		}
	}
	t.Logf("the unary probe left the breaker %v, counted %v", unaryState, unaryCounts)
}

// atk26bDurationSum is the sum of attempt_duration_seconds of method.
func atk26bDurationSum(t *testing.T, reg *prometheus.Registry, method string) (float64, uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "resilient_client_attempt_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == atk24eShort(method) {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0, 0
}

// TestAttack26BStreamDurationIsTheTimeToItsFirstMessage: README, Metrics:
// attempt_duration_seconds is, for a stream, the time "to its first
// message, or to its end when it ends without one". On the client's clock
// (a fake one): 5 s pass between the opening and the first message, then
// 100 s until the stream ends; the one sample is 5 s. A stream that ends
// without a message (cancelled 7 s after it opened) is 7 s; the breaker's
// clock is the same.
func TestAttack26BStreamDurationIsTheTimeToItsFirstMessage(t *testing.T) {
	atkNoLeak(t)
	cc := atk26bServer(t)
	for _, m := range []string{atk26bChat, atk26bWatch, atk26bUpload} {
		t.Run(atk24eShort(m), func(t *testing.T) {
			clk := newAtkClock()
			_, conn, reg := atk26bClientWith(t, cc, 30*time.Second, nil, runtime.WithClock(clk))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cs, err := conn.NewStream(ctx, atk26bDescs[m], m)
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(5 * time.Second)
			if err := cs.SendMsg(wrapperspb.String("echo")); err != nil {
				t.Fatal(err)
			}
			if m != atk26bChat {
				_ = cs.CloseSend()
			}
			if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				t.Fatalf("first message: %v", err)
			}
			clk.Advance(100 * time.Second)
			if m == atk26bChat {
				_ = cs.CloseSend()
			}
			if m != atk26bUpload {
				if err := atk26bRecvAll(t, cs); err != nil {
					t.Fatalf("reading to the end: %v", err)
				}
			}
			if sum, n := atk26bDurationSum(t, reg, m); n != 1 || sum != 5 {
				t.Errorf("attempt_duration_seconds: %d samples summing %vs, want one of 5s (to the first message)", n, sum)
			}

			_, conn2, reg2 := atk26bClientWith(t, cc, 30*time.Second, nil, runtime.WithClock(clk))
			ctx2, cancel2 := context.WithCancel(context.Background())
			if _, err := atk26bOpen(ctx2, conn2, m, "hdrhang"); err != nil {
				t.Fatal(err)
			}
			clk.Advance(7 * time.Second)
			cancel2()
			atkWaitFor(t, "the cancelled stream counted", func() bool { _, n := atk26bDurationSum(t, reg2, m); return n != 0 })
			if sum, n := atk26bDurationSum(t, reg2, m); n != 1 || sum != 7 {
				t.Errorf("a stream without a message: %d samples summing %vs, want one of 7s (to its end)", n, sum)
			}
		})
	}
}

// TestAttack26BOverallTimeoutBoundsTheWholeStream: README, Streams: "The
// method's overall_timeout, or else its timeout, bounds the whole
// stream". With a timeout of 30 ms and an overall_timeout of 300 ms, a
// stream the server holds open (its header sent) ends at 300 ms, not at
// 30 ms; with the timeout alone, at it.
func TestAttack26BOverallTimeoutBoundsTheWholeStream(t *testing.T) {
	atkNoLeak(t)
	cc := atk26bServer(t)
	for _, d := range []struct {
		name             string
		timeout, overall time.Duration
		want             time.Duration
	}{
		{"overall_timeout and timeout", 30 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		{"timeout alone", 100 * time.Millisecond, 0, 100 * time.Millisecond},
	} {
		for _, m := range atk26bStreams {
			t.Run(d.name+"/"+atk24eShort(m), func(t *testing.T) {
				rt, conn, _ := atk26bClientWith(t, cc, d.timeout, func(p *policy.Service) {
					for i := range p.Methods {
						p.Methods[i].OverallTimeout = d.overall
					}
				})
				began := time.Now()
				cs, err := atk26bOpen(context.Background(), conn, m, "hdrhang")
				if err != nil {
					t.Fatal(err)
				}
				if m != atk26bWatch {
					_ = cs.CloseSend()
				}
				err = atk26bRecvAll(t, cs)
				took := time.Since(began)
				if status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("the stream ended with %v, want DEADLINE_EXCEEDED", err)
				}
				if took < d.want-10*time.Millisecond || took > d.want+3*time.Second {
					t.Errorf("the stream lasted %v, want its bound %v (timeout %v, overall_timeout %v)", took, d.want, d.timeout, d.overall)
				}
				atkWantFree(t, rt, m, "the bound")
			})
		}
	}
}

// TestAttack26BStreamsTakeNoPartInTheAdaptiveLimitNorTheThrottler:
// README, Adaptive concurrency limit: "Streams take no part", and a
// stream lists no adaptive limit (Overrides). A service-level adaptive
// limit (one place, which cannot grow) and client throttle over a shared
// bulkhead of 8: 4 hung streams open at once take no place of the limit
// (a unary Get still goes through beside them), and their 4
// DEADLINE_EXCEEDED at their timeout neither lower the limit's gauge nor
// raise the throttler's refusal probability; a unary Get goes through
// after them.
func TestAttack26BStreamsTakeNoPartInTheAdaptiveLimitNorTheThrottler(t *testing.T) {
	atkNoLeak(t)
	cc := atk26bServer(t)
	rt, conn, reg := atk26bClientWith(t, cc, 300*time.Millisecond, func(p *policy.Service) {
		p.Bulkhead = &policy.Bulkhead{Permits: 8}
		p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, MaxLimit: 1, InitialLimit: 1}
		p.ClientThrottle = &policy.Throttle{}
		for i := range p.Methods {
			p.Methods[i].Bulkhead, p.Methods[i].Breaker = nil, nil
			if p.Methods[i].Kind == policy.KindUnary {
				p.Methods[i].OverallTimeout = time.Second
			}
		}
	})
	get := atk26bGetHandle(t, rt, conn)
	ctx := context.Background()
	var streams []grpc.ClientStream
	for i := range 4 {
		cs, err := atk26bOpen(ctx, conn, atk26bStreams[i%3], "hdrhang")
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		streams = append(streams, cs)
	}
	if _, err := get.Call(ctx, wrapperspb.String("x")); err != nil {
		t.Errorf("Get beside 4 open streams under an adaptive limit of 1: %v, want an answer (streams take no place)", err)
	}
	for i, cs := range streams {
		if err := atk26bRecvAll(t, cs); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("stream %d: %v, want DEADLINE_EXCEEDED at its timeout", i, err)
		}
	}
	atkWaitFor(t, "the streams counted", func() bool {
		n := 0.0
		for _, m := range atk26bStreams {
			n += atk24eAttempts(t, reg, m)["DEADLINE_EXCEEDED"]
		}
		return n == 4
	})
	if l := metricValue(t, reg, "resilient_client_adaptive_limit", "limiter", "shared"); l != 1 {
		t.Errorf("adaptive_limit %v after 4 streams timed out, want 1", l)
	}
	if p := metricValue(t, reg, "resilient_client_throttle_refusal_probability"); p != 0 {
		t.Errorf("throttle_refusal_probability %v after 4 streams timed out, want 0 (streams take no part)", p)
	}
	for i := range 5 {
		if _, err := get.Call(ctx, wrapperspb.String("x")); err != nil {
			t.Errorf("Get %d after the streams: %v", i, err)
		}
	}
	if g := metricValue(t, reg, "resilient_client_bulkhead_in_use", "bulkhead", "shared"); g != 0 {
		t.Errorf("bulkhead_in_use %v at the end, want 0", g)
	}
}

// TestAttack26BConnectionCutInTheMiddleOfAMessage: README, What it
// survives ("a stream's Recv fails UNAVAILABLE and frees its permit") and
// Its outcome. A proxy slows the server's bytes so that a 4 MiB message
// takes more than a second to come; the connection is cut while the
// caller waits in Recv with part of it received. The stream ends
// UNAVAILABLE, its permit back at once, bulkhead_in_use 0, counted once:
// as a failure when it was its first message (the breaker opens), as the
// OK of its first message when a message came before (the breaker stays
// closed). OnFinish runs once with UNAVAILABLE.
func TestAttack26BConnectionCutInTheMiddleOfAMessage(t *testing.T) {
	atkNoLeak(t)
	for _, d := range []struct {
		method, first string
		counted       string
		state         runtime.State
	}{
		{atk26bWatch, "big", "UNAVAILABLE", runtime.StateOpen},
		{atk26bUpload, "big", "UNAVAILABLE", runtime.StateOpen},
		{atk26bChat, "big", "UNAVAILABLE", runtime.StateOpen},
		{atk26bWatch, "smallbig", "OK", runtime.StateClosed},
		{atk26bChat, "smallbig", "OK", runtime.StateClosed},
	} {
		t.Run(atk24eShort(d.method)+"/"+d.first, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gs := atk26bGRPCServer()
			served := make(chan struct{})
			go func() { defer close(served); _ = gs.Serve(lis) }()
			p := tcpproxy.Start(t, lis.Addr().String())
			cc, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { cc.Close(); gs.Stop(); <-served }()
			rt, conn, reg := atk26bClientWith(t, cc, 30*time.Second, nil)
			var f attack22aFinishes
			cs, err := atk26bOpen(context.Background(), conn, d.method, d.first, f.option())
			if err != nil {
				t.Fatal(err)
			}
			if d.method == atk26bChat {
				_ = cs.CloseSend()
			}
			if d.first == "smallbig" {
				if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					t.Fatalf("first message: %v", err)
				}
			}
			p.DelayReplies(10 * time.Millisecond) // 32 KiB a read: 4 MiB in about 1.3 s
			if d.method == atk26bUpload {
				_ = cs.CloseSend()
			}
			recvd := make(chan error, 1)
			go func() { recvd <- cs.RecvMsg(new(wrapperspb.StringValue)) }()
			time.Sleep(150 * time.Millisecond)
			select {
			case err := <-recvd:
				t.Fatalf("the 4 MiB message came before the cut (%v): the test cut nothing mid-message", err)
			default:
			}
			p.Cut()
			err = <-recvd
			if status.Code(err) != codes.Unavailable {
				t.Errorf("Recv across the cut: %v, want UNAVAILABLE", err)
			}
			if n := atkInUse(t, rt, d.method); n != 0 {
				t.Errorf("%d permits taken when Recv returned, want 0", n)
			}
			if g := atk26bInUse(t, reg, d.method); g != 0 {
				t.Errorf("bulkhead_in_use %v, want 0", g)
			}
			atk26bFinished(t, &f, "the cut stream", codes.Unavailable)
			if got := atk24eAttempts(t, reg, d.method); len(got) != 1 || got[d.counted] != 1 {
				t.Errorf("attempts_total %v, want one under %s", got, d.counted)
			}
			atkWantBreaker(t, rt, d.method, d.state, "breaker %v after the cut, want "+d.state.String())
			p.Restore()
		})
	}
}

// TestAttack26BStormOfAbandonedStreams: many streams of the three kinds
// opened at once on a bulkhead of 4 (max_wait 2 s), each ended a way
// above: dropped at its Header with the server hung, dropped after one
// message, read to a message that does not unmarshal, cancelled between
// two Recv after a message, its header and an OK with no message. Under
// -race: every permit back, bulkhead_in_use 0, each stream opened counted
// once in attempts_total and once in attempt_duration_seconds, each
// refused counted in bulkhead_rejections_total, OnFinish run once per
// stream opened or refused, and no goroutine left.
func TestAttack26BStormOfAbandonedStreams(t *testing.T) {
	atkNoLeak(t)
	cc := atk26bServer(t)
	rt, conn, reg := atk26bClientWith(t, cc, 100*time.Millisecond, func(p *policy.Service) {
		for i := range p.Methods {
			p.Methods[i].Bulkhead = &policy.Bulkhead{Permits: 4, MaxWait: 2 * time.Second}
			p.Methods[i].Breaker = nil
		}
	})
	// cut: opens that failed otherwise than on a full bulkhead (the
	// stream's 100 ms ran out on a loaded machine, in the permit's wait,
	// which counts nothing, or in gRPC's opening, an attempt): each is one
	// attempt or none.
	var opened, refused, cut, finished [3]atomic.Int64
	var wg sync.WaitGroup
	ways := []string{"header", "one", "badmsg", "cancel", "hdrok"}
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var abandoned []context.CancelFunc // their contexts live on until the storm is over
			defer func() {
				for _, c := range abandoned {
					c()
				}
			}()
			for i := range 4 {
				mi := (g + i) % 3
				m := atk26bStreams[mi]
				way := ways[(g*7+i)%len(ways)]
				if m == atk26bUpload && (way == "one" || way == "cancel") {
					way = "header"
				}
				first := map[string]string{"header": "hdrhang", "one": "onehang", "badmsg": "badmsg", "cancel": "onehang", "hdrok": "hdrok"}[way]
				ctx, cancel := context.WithCancel(context.Background())
				fin := grpc.OnFinish(func(error) { finished[mi].Add(1) })
				cs, err := atk26bOpen(ctx, conn, m, first, fin)
				if err != nil {
					switch {
					case errors.Is(err, runtime.ErrBulkheadFull):
						refused[mi].Add(1)
					case status.Code(err) == codes.DeadlineExceeded:
						cut[mi].Add(1)
					default:
						t.Errorf("%s %s: opening: %v", atk24eShort(m), way, err)
					}
					cancel()
					continue
				}
				opened[mi].Add(1)
				switch way {
				case "header":
					_, _ = cs.Header()
				case "one":
					_ = cs.RecvMsg(new(wrapperspb.StringValue))
				case "badmsg", "hdrok":
					_ = cs.CloseSend()
					for cs.RecvMsg(new(wrapperspb.StringValue)) == nil {
					}
				case "cancel":
					_ = cs.RecvMsg(new(wrapperspb.StringValue))
					cancel()
					_ = cs.RecvMsg(new(wrapperspb.StringValue))
				}
				abandoned = append(abandoned, cancel)
			}
		}()
	}
	wg.Wait()
	for mi, m := range atk26bStreams {
		short := atk24eShort(m)
		atkWantFree(t, rt, m, "the storm")
		if g := atk26bInUse(t, reg, m); g != 0 {
			t.Errorf("%s: bulkhead_in_use %v after the storm, want 0", short, g)
		}
		atkWaitFor(t, short+": every stream counted", func() bool {
			n := 0.0
			for _, v := range atk24eAttempts(t, reg, m) {
				n += v
			}
			return int64(n) >= opened[mi].Load()
		})
		atkWaitFor(t, short+": every OnFinish run", func() bool { return finished[mi].Load() >= opened[mi].Load()+refused[mi].Load()+cut[mi].Load() })
		time.Sleep(20 * time.Millisecond)
		n := 0.0
		for _, v := range atk24eAttempts(t, reg, m) {
			n += v
		}
		if int64(n) < opened[mi].Load() || int64(n) > opened[mi].Load()+cut[mi].Load() {
			t.Errorf("%s: attempts_total counts %v streams, %d were opened and %d cut opening", short, n, opened[mi].Load(), cut[mi].Load())
		}
		if got := atk24eDurations(t, reg, short); got != uint64(n) {
			t.Errorf("%s: attempt_duration_seconds has %d samples, %v attempts counted", short, got, n)
		}
		if got := metricValue(t, reg, "resilient_client_bulkhead_rejections_total", "method", short); int64(got) != refused[mi].Load() {
			t.Errorf("%s: bulkhead_rejections_total %v, %d refused", short, got, refused[mi].Load())
		}
		if got := finished[mi].Load(); got != opened[mi].Load()+refused[mi].Load()+cut[mi].Load() {
			t.Errorf("%s: OnFinish ran %d times for %d streams opened, %d refused and %d cut opening", short, got, opened[mi].Load(), refused[mi].Load(), cut[mi].Load())
		}
		if opened[mi].Load() == 0 {
			t.Errorf("%s: no stream opened", short)
		}
		t.Logf("%s: %d opened, %d refused, attempts %v", short, opened[mi].Load(), refused[mi].Load(), atk24eAttempts(t, reg, m))
		atk26bWantExactlyFour(t, rt, conn, m)
	}
}

// atk26bWantExactlyFour checks that method's bulkhead of 4 permits (with a
// max_wait) holds exactly 4: four streams open now, the permits then read
// 4, and a fifth whose context ends before any of them does (the streams'
// timeout is 100 ms) is not let through.
func atk26bWantExactlyFour(t *testing.T, rt *runtime.Client, conn grpc.ClientConnInterface, method string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 4 {
		if _, err := conn.NewStream(ctx, atk26bDescs[method], method); err != nil {
			t.Fatalf("%s: stream %d of 4 after the storm: %v", atk24eShort(method), i+1, err)
		}
	}
	if n := atkInUse(t, rt, method); n != 4 {
		t.Errorf("%s: %d permits taken by 4 open streams, want 4", atk24eShort(method), n)
	}
	fifth, cancel5 := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel5()
	if _, err := conn.NewStream(fifth, atk26bDescs[method], method); err == nil {
		t.Errorf("%s: a fifth stream beside 4 open ones got a permit (a permit given back twice)", atk24eShort(method))
	}
	cancel()
	atkWantFree(t, rt, method, "cancelling the check's streams")
}

// atk26bGetHandle is the handle of atk26bGet on rt, calling through conn.
func atk26bGetHandle(t *testing.T, rt *runtime.Client, conn grpc.ClientConnInterface) *runtime.UnaryHandle[wrapperspb.StringValue, wrapperspb.StringValue] {
	t.Helper()
	get, err := runtime.NewUnary(rt, atk26bGet, func(ctx context.Context, in *wrapperspb.StringValue, opts ...grpc.CallOption) (*wrapperspb.StringValue, error) {
		out := new(wrapperspb.StringValue)
		return out, conn.Invoke(ctx, atk26bGet, in, out, opts...)
	}, runtime.UnaryHooks[wrapperspb.StringValue, wrapperspb.StringValue]{})
	if err != nil {
		t.Fatal(err)
	}
	return get
}
