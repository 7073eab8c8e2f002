package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // the codec nilOptCodec passes to
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestNilCallOptionsAreRefused: a call option that is nil, or holds a nil
// grpc-go writes through or calls, makes grpc-go panic inside the call:
// after the layers took a token, a permit or a probe; on the goroutine of a
// cache's shared call, where no caller may wait any more; for a stream on
// the goroutine gRPC ends it on (a stream given grpc.Peer(nil) ended the
// test binary; a panic while grpc-go held the stream's lock left its
// goroutine blocked for ever). Each is refused first, on every handle and
// on Client.Conn's Invoke and NewStream that hand-written code calls, with
// INVALID_ARGUMENT naming the option's place and what in it is nil: the
// server sees no call, and the bulkhead's one permit and the half-open
// breaker's one probe are free for the good call that follows. The options
// grpc-go takes nil in without harm (ForceCodecV2, PerRPCCredentials) are
// let through: they reach the server.
func TestNilCallOptionsAreRefused(t *testing.T) {
	atkNoLeak(t)
	r := startNilOptRig(t)
	var md metadata.MD
	options := []struct {
		name string
		opt  grpc.CallOption
		// want: words the error has; "" when the option is let through,
		// "!Code" when let through and grpc-go answers it with that code.
		want string
	}{
		{"nil", nil, "is nil"},
		{"nil *HeaderCallOption", (*grpc.HeaderCallOption)(nil), "is a nil *grpc.HeaderCallOption"},
		{"nil *PeerCallOption", (*grpc.PeerCallOption)(nil), "is a nil *grpc.PeerCallOption"},
		{"nil *T of the program's", (*nilOptEmpty)(nil), "is a nil *runtime_test.nilOptEmpty"},
		{"Header(nil)", grpc.Header(nil), "nil HeaderAddr, as grpc.Header(nil) makes"},
		{"Trailer(nil)", grpc.Trailer(nil), "nil TrailerAddr, as grpc.Trailer(nil) makes"},
		{"Peer(nil)", grpc.Peer(nil), "nil PeerAddr, as grpc.Peer(nil) makes"},
		{"OnFinish(nil)", grpc.OnFinish(nil), "nil OnFinish, as grpc.OnFinish(nil) makes"},
		{"ForceCodec(nil)", grpc.ForceCodec(nil), "nil Codec, as grpc.ForceCodec(nil) makes"},
		{"CallCustomCodec(nil)", grpc.CallCustomCodec(nil), "nil Codec, as grpc.CallCustomCodec(nil) makes"},
		{"&HeaderCallOption{}", &grpc.HeaderCallOption{}, "nil HeaderAddr"},
		{"embeds a nil option", nilOptWrapped{}, "embeds a nil grpc.CallOption"},
		{"&embeds a nil option", &nilOptWrapped{}, "embeds a nil grpc.CallOption"},
		{"embeds Peer(nil)", nilOptWrapped{grpc.Peer(nil)}, "nil PeerAddr"},
		{"embeds a HeaderCallOption of nil", nilOptHeader{}, "nil HeaderAddr"},
		{"embeds a nil *TrailerCallOption", nilOptTrailerPtr{}, "embeds a nil *grpc.TrailerCallOption"},
		{"embeds, unexported, one embedding a nil", nilOptOuter{}, "embeds a runtime_test.nilOptWrapped that embeds a nil grpc.CallOption"},
		{"points to itself", nilOptSelf(), "points to itself"},
		// Not a nil, as sure a panic: grpc-go calls a nil cleanup function.
		{"MaxRetryRPCBufferSize(-1)", grpc.MaxRetryRPCBufferSize(-1), "has a negative MaxRetryRPCBufferSize (-1)"},
		{"embeds MaxRetryRPCBufferSize(-1)", nilOptWrapped{grpc.MaxRetryRPCBufferSize(-1)}, "has a negative MaxRetryRPCBufferSize"},
		{"ForceCodecV2 of a nil *T of value methods", grpc.ForceCodecV2((*nilOptCodec)(nil)), "has a CodecV2 that is a nil *runtime_test.nilOptCodec"},
		{"PerRPCCredentials of a nil *T of value methods", grpc.PerRPCCredentials((*nilOptCreds)(nil)), "has a Creds that is a nil *runtime_test.nilOptCreds"},
		// Let through: no nil to grpc-go, or no nil at all.
		{"ForceCodecV2(nil)", grpc.ForceCodecV2(nil), ""},
		{"PerRPCCredentials(nil)", grpc.PerRPCCredentials(nil), ""},
		{"PerRPCCredentials of a value", grpc.PerRPCCredentials(nilOptCreds{}), ""},
		{"ForceCodecV2 of a value", grpc.ForceCodecV2(nilOptCodec{}), ""},
		{"Header(&md)", grpc.Header(&md), ""},
		{"embeds OnFinish(f)", nilOptWrapped{grpc.OnFinish(func(error) {})}, ""},
		// grpc-go (and the runtime) run an OnFinish given by value alone:
		// one behind a pointer or an embedding is never called.
		{"&OnFinishCallOption{}", &grpc.OnFinishCallOption{}, ""},
		{"embeds OnFinish(nil)", nilOptWrapped{grpc.OnFinish(nil)}, ""},
		{"embeds EmptyCallOption", nilOptEmpty{}, ""},
		// An option embedding a nil one deeper than its methods come from:
		// grpc-go never calls the nil one.
		{"embeds EmptyCallOption and, deeper, a nil option", nilOptTwoDepths{}, ""},
		// A nil codec whose methods take a pointer and need none: it works.
		{"ForceCodecV2 of a nil *T of pointer methods", grpc.ForceCodecV2((*nilOptNilSafeCodec)(nil)), ""},
		// grpc-go's options of odd values: grpc-go's own answer, no panic.
		{"WaitForReady(true)", grpc.WaitForReady(true), ""},
		{"StaticMethod()", grpc.StaticMethod(), ""},
		{"UseCompressor(\"\")", grpc.UseCompressor(""), ""},
		{"CallContentSubtype(\"\")", grpc.CallContentSubtype(""), ""},
		{"CallAuthority(\"\")", grpc.CallAuthority(""), ""},
		{"MaxRetryRPCBufferSize(0)", grpc.MaxRetryRPCBufferSize(0), ""},
		{"MaxCallSendMsgSize(1<<30)", grpc.MaxCallSendMsgSize(1 << 30), ""},
		{"MaxCallRecvMsgSize(-1)", grpc.MaxCallRecvMsgSize(-1), "!ResourceExhausted"},
		{"MaxCallSendMsgSize(-1)", grpc.MaxCallSendMsgSize(-1), "!ResourceExhausted"},
		{"UseCompressor(\"none such\")", grpc.UseCompressor("none such"), "!Internal"},
		{"CallContentSubtype(\"No/Such\\n\")", grpc.CallContentSubtype("No/Such\n"), "!Internal"},
	}
	for si, s := range append(r.shapes, generatedNilOptShapes(t)...) {
		for _, o := range options {
			t.Run(s.name+"/"+o.name, func(t *testing.T) {
				// The option at place 0 alone, or at place 1 after a good
				// one: the message names the caller's place, on Conn too,
				// where the generated code puts grpc.StaticMethod first.
				place := si % 2
				opts := []grpc.CallOption{o.opt}
				if place == 1 {
					opts = []grpc.CallOption{grpc.WaitForReady(false), o.opt}
				}
				ctx := context.Background()
				if s.policed {
					r.halfOpen(t, s)
				}
				calls := func() int { return r.calls(s.method) }
				if s.seen != nil {
					calls = s.seen
				}
				before := calls()
				var err error
				if p := r18Panicked(func() { err = s.call(ctx, r.value("bad"), opts...) }); p != nil {
					t.Fatalf("panicked: %v", p)
				}
				seen := calls() - before
				if code, ok := strings.CutPrefix(o.want, "!"); ok {
					if status.Code(err).String() != code || strings.Contains(err.Error(), "call option") {
						t.Fatalf("let-through option: %v (the server saw %d calls); want grpc-go's %s", err, seen, code)
					}
				} else if o.want == "" {
					if err != nil || seen != 1 {
						t.Fatalf("let-through option: %v, the server saw %d calls; want success, 1 call", err, seen)
					}
				} else {
					wantWords := fmt.Sprintf("call option %d ", place)
					if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), wantWords) ||
						!strings.Contains(err.Error(), o.want) || !strings.Contains(err.Error(), s.method) {
						t.Errorf("got %v, want INVALID_ARGUMENT naming %q, %q and %s", err, wantWords, o.want, s.method)
					}
					if seen != 0 {
						t.Errorf("the server saw %d calls of %s, want none", seen, s.method)
					}
				}
				if !s.policed {
					if s.inUse != nil {
						atkWaitFor(t, "the permits of "+s.method+" free", func() bool { return s.inUse() == 0 })
					}
					if err := s.call(ctx, r.value("good")); err != nil {
						t.Errorf("a good call after: %v", err)
					}
					return
				}
				// The one permit and the one probe are free: the good call
				// takes them, succeeds and closes the breaker.
				r.wantFree(t, s.method, "after the option")
				if err := s.call(ctx, r.value("good")); err != nil {
					t.Fatalf("a good call after, at bulkhead 1 and breaker half-open: %v", err)
				}
				if st, _ := r.rt.BreakerState(s.method); st != runtime.StateClosed {
					t.Errorf("breaker %v after the good call, want closed", st)
				}
				r.wantFree(t, s.method, "after the good call")
			})
		}
	}
}

// nilOptWrapped is a call option of a program's own, made by embedding
// grpc.CallOption (whose methods are unexported).
type nilOptWrapped struct{ grpc.CallOption }

// nilOptHeader is an option of a program's embedding grpc-go's Header
// option by value, left with a nil address.
type nilOptHeader struct{ grpc.HeaderCallOption }

// nilOptTrailerPtr embeds a pointer to grpc-go's Trailer option, left nil.
type nilOptTrailerPtr struct{ *grpc.TrailerCallOption }

// nilOptEmpty is an option of a program's with no nil in it.
type nilOptEmpty struct{ grpc.EmptyCallOption }

// nilOptOuter embeds, by an unexported field, an option that embeds a nil
// grpc.CallOption: grpc-go calls through it all the same.
type nilOptOuter struct{ nilOptWrapped }

// nilOptTwoDepths has grpc.EmptyCallOption's methods (the shallower
// embedding, Go's rule): the nil option NilOptExported embeds is never
// called.
type nilOptTwoDepths struct {
	grpc.EmptyCallOption
	NilOptExported
}

// NilOptExported is nilOptWrapped by an exported name, so that a struct
// embedding it has an exported field.
type NilOptExported struct{ grpc.CallOption }

// nilOptSelf returns an option whose grpc-go methods are its own, through
// the grpc.CallOption it embeds: grpc-go would call it until the stack
// overflows, which no recover stops.
func nilOptSelf() grpc.CallOption {
	o := &nilOptWrapped{}
	o.CallOption = o
	return o
}

// nilOptCodec is a codec whose methods take a value: grpc-go calling one
// through a nil *nilOptCodec panics.
type nilOptCodec struct{}

func (nilOptCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(protoName).Marshal(v)
}

func (nilOptCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(protoName).Unmarshal(data, v)
}
func (nilOptCodec) Name() string { return protoName }

// nilOptNilSafeCodec is a codec whose methods take a pointer and never
// read it: a nil *nilOptNilSafeCodec is a working codec.
type nilOptNilSafeCodec struct{}

func (*nilOptNilSafeCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(protoName).Marshal(v)
}

func (*nilOptNilSafeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(protoName).Unmarshal(data, v)
}
func (*nilOptNilSafeCodec) Name() string { return protoName }

const protoName = "proto"

// nilOptCreds are per-call credentials whose methods take a value.
type nilOptCreds struct{}

func (nilOptCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return nil, nil
}
func (nilOptCreds) RequireTransportSecurity() bool { return false }

// nilOptRig is a loopback server of every kind of method, counting the
// calls it sees, and a runtime client with a handle on each: per method a
// bulkhead of one permit that waits for none, and a breaker that one
// failure opens and one probe closes again, on a fake clock.
type nilOptRig struct {
	rt     *runtime.Client
	clk    *fakeClock
	shapes []nilOptShape
	mu     sync.Mutex
	seen   map[string]int
	n      int
}

// nilOptShape is one way of calling: a full exchange of value with the
// server (a message sent, the answers read to the end).
type nilOptShape struct {
	name    string
	method  string
	policed bool // the method has a bulkhead and a breaker this way
	call    func(ctx context.Context, value string, opts ...grpc.CallOption) error
	// seen counts the server's calls of method, when not the rig's server;
	// inUse the permits of method taken, when it has a bulkhead other than
	// the rig's.
	seen  func() int
	inUse func() int
}

const (
	nilOptUnary  = "/nilopt.Svc/Unary"
	nilOptCached = "/nilopt.Svc/Cached"
	nilOptKeyed  = "/nilopt.Svc/Keyed"
	nilOptHedged = "/nilopt.Svc/Hedged"
	nilOptPlain  = "/nilopt.Svc/Plain" // no policy
	nilOptUpload = "/nilopt.Svc/Upload"
	nilOptWatch  = "/nilopt.Svc/Watch"
	nilOptChat   = "/nilopt.Svc/Chat"
	nilOptRaw    = "/nilopt.Svc/Raw" // a bidirectional stream of no policy
)

var (
	nilOptUploadDesc = grpc.StreamDesc{StreamName: "Upload", ClientStreams: true}
	nilOptWatchDesc  = grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
	nilOptChatDesc   = grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}
	nilOptRawDesc    = grpc.StreamDesc{StreamName: "Raw", ServerStreams: true, ClientStreams: true}
)

// value returns a value no call sent before (no cache answers it).
func (r *nilOptRig) value(what string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return fmt.Sprintf("%s-%d", what, r.n)
}

func (r *nilOptRig) calls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[method]
}

// answer counts a call of method and answers value: UNAVAILABLE for a
// value starting "fail".
func (r *nilOptRig) answer(method, value string) error {
	r.mu.Lock()
	r.seen[method]++
	r.mu.Unlock()
	if strings.HasPrefix(value, "fail") {
		return status.Error(codes.Unavailable, "injected")
	}
	return nil
}

// halfOpen opens s's breaker with one failed call and lets its cool-down
// pass: the next call is its one probe.
func (r *nilOptRig) halfOpen(t *testing.T, s nilOptShape) {
	t.Helper()
	if err := s.call(context.Background(), r.value("fail")); status.Code(err) != codes.Unavailable {
		t.Fatalf("a failing call: %v, want UNAVAILABLE", err)
	}
	if st, _ := r.rt.BreakerState(s.method); st != runtime.StateOpen {
		t.Fatalf("breaker %v after a failure, want open", st)
	}
	r.clk.Advance(time.Second + time.Millisecond)
	r.wantFree(t, s.method, "after the failing call")
}

// wantFree waits for method's permit to be given back (a stream gives it
// back as it ends, which its last Recv may see first).
func (r *nilOptRig) wantFree(t *testing.T, method, after string) {
	t.Helper()
	atkWaitFor(t, "the permit of "+method+" free "+after, func() bool {
		n, ok := r.rt.BulkheadInUse(method)
		return ok && n == 0
	})
}

func startNilOptRig(t *testing.T) *nilOptRig {
	t.Helper()
	r := &nilOptRig{clk: newAtkClock(), seen: map[string]int{}}
	unary := func(method string) grpc.MethodDesc {
		return grpc.MethodDesc{MethodName: method[strings.LastIndex(method, "/")+1:],
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var in wrapperspb.StringValue
				if err := dec(&in); err != nil {
					return nil, err
				}
				return &in, r.answer(method, in.GetValue())
			}}
	}
	// echo serves a stream of method: each message received is answered
	// (once the client ends, for a client stream), a "fail…" with
	// UNAVAILABLE.
	echo := func(desc grpc.StreamDesc, method string) grpc.StreamDesc {
		desc.Handler = func(_ any, st grpc.ServerStream) error {
			var in wrapperspb.StringValue
			if err := st.RecvMsg(&in); err != nil {
				return err
			}
			if err := r.answer(method, in.GetValue()); err != nil {
				return err
			}
			for {
				if !desc.ClientStreams || desc.ServerStreams {
					if err := st.SendMsg(&in); err != nil {
						return err
					}
				}
				if !desc.ClientStreams {
					return nil
				}
				if err := st.RecvMsg(&in); err == io.EOF {
					if !desc.ServerStreams {
						return st.SendMsg(&in)
					}
					return nil
				} else if err != nil {
					return err
				}
			}
		}
		return desc
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "nilopt.Svc", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{unary(nilOptUnary), unary(nilOptCached), unary(nilOptKeyed), unary(nilOptHedged), unary(nilOptPlain)},
		Streams: []grpc.StreamDesc{echo(nilOptUploadDesc, nilOptUpload), echo(nilOptWatchDesc, nilOptWatch),
			echo(nilOptChatDesc, nilOptChat), echo(nilOptRawDesc, nilOptRaw)},
	}, r)
	go func() { _ = gs.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
	})

	guard := func(name string, kind policy.Kind) policy.Method {
		return policy.Method{Name: name, Kind: kind, Timeout: 10 * time.Second,
			Bulkhead: &policy.Bulkhead{Permits: 1},
			Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second, CoolDown: time.Second,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}}
	}
	cached, keyed, hedged := guard(nilOptCached, policy.KindUnary), guard(nilOptKeyed, policy.KindUnary), guard(nilOptHedged, policy.KindUnary)
	cached.Idempotent = true
	cached.Cache = &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 1000, KeyFields: []string{"value"}}
	keyed.IdempotencyKey = "value"
	hedged.Idempotent = true
	hedged.Hedging = &policy.Hedging{Delay: 5 * time.Second, MaxCopies: 2}
	rt, err := runtime.NewClient(&policy.Service{Name: "nilopt.Svc", Methods: []policy.Method{
		guard(nilOptUnary, policy.KindUnary), cached, keyed, hedged,
		guard(nilOptUpload, policy.KindClientStreaming), guard(nilOptWatch, policy.KindServerStreaming),
		guard(nilOptChat, policy.KindBidiStreaming),
	}}, runtime.WithClock(r.clk))
	if err != nil {
		t.Fatal(err)
	}
	r.rt = rt
	conn := rt.Conn(cc)

	// What protoc-gen-go-grpc's plain client does, on the connection
	// Client.Conn wraps: grpc.StaticMethod first, then the caller's.
	invoke := func(method string) func(context.Context, *wrapperspb.StringValue, ...grpc.CallOption) (*wrapperspb.StringValue, error) {
		return func(ctx context.Context, in *wrapperspb.StringValue, opts ...grpc.CallOption) (*wrapperspb.StringValue, error) {
			out := new(wrapperspb.StringValue)
			if err := conn.Invoke(ctx, method, in, out, append([]grpc.CallOption{grpc.StaticMethod()}, opts...)...); err != nil {
				return nil, err
			}
			return out, nil
		}
	}
	open := func(desc *grpc.StreamDesc, method string) func(context.Context, ...grpc.CallOption) (*grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue], error) {
		return func(ctx context.Context, opts ...grpc.CallOption) (*grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue], error) {
			cs, err := conn.NewStream(ctx, desc, method, append([]grpc.CallOption{grpc.StaticMethod()}, opts...)...)
			if err != nil {
				return nil, err
			}
			return &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]{ClientStream: cs}, nil
		}
	}
	type sv = wrapperspb.StringValue
	unaryShape := func(name, method string, hooks runtime.UnaryHooks[sv, sv]) nilOptShape {
		h, err := runtime.NewUnary(rt, method, invoke(method), hooks)
		if err != nil {
			t.Fatal(err)
		}
		return nilOptShape{name: name, method: method, policed: true,
			call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
				_, err := h.Call(ctx, wrapperspb.String(v), opts...)
				return err
			}}
	}
	// exchange sends v on a stream just opened and reads it to its end.
	exchange := func(st *grpc.GenericClientStream[sv, sv], err error, v string, send bool) error {
		if err != nil {
			return err
		}
		if send {
			if err := st.Send(wrapperspb.String(v)); err != nil && err != io.EOF {
				return err
			}
			if err := st.CloseSend(); err != nil {
				return err
			}
		}
		for {
			if _, err := st.Recv(); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	watchOpen := open(&nilOptWatchDesc, nilOptWatch)
	watch, err := runtime.NewServerStream(rt, nilOptWatch, func(ctx context.Context, in *sv, opts ...grpc.CallOption) (grpc.ServerStreamingClient[sv], error) {
		st, err := watchOpen(ctx, opts...)
		if err != nil {
			return nil, err
		}
		if err := st.SendMsg(in); err != nil && err != io.EOF {
			return nil, err
		}
		return st, st.CloseSend()
	})
	if err != nil {
		t.Fatal(err)
	}
	upload, err := runtime.NewStream(rt, nilOptUpload, open(&nilOptUploadDesc, nilOptUpload))
	if err != nil {
		t.Fatal(err)
	}
	chat, err := runtime.NewStream(rt, nilOptChat, open(&nilOptChatDesc, nilOptChat))
	if err != nil {
		t.Fatal(err)
	}
	plain, raw, rawWatch := invoke(nilOptPlain), open(&nilOptRawDesc, nilOptRaw), watchOpen
	r.shapes = []nilOptShape{
		unaryShape("unary", nilOptUnary, runtime.UnaryHooks[sv, sv]{}),
		unaryShape("cached unary", nilOptCached, runtime.UnaryHooks[sv, sv]{CacheKey: func(in *sv) string { return in.GetValue() }}),
		unaryShape("keyed unary", nilOptKeyed, runtime.UnaryHooks[sv, sv]{IdempotencyKey: func(in *sv) string { return in.GetValue() }}),
		unaryShape("hedged unary", nilOptHedged, runtime.UnaryHooks[sv, sv]{}),
		{name: "client stream", method: nilOptUpload, policed: true, call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
			st, err := upload.Call(ctx, opts...)
			return exchange(st, err, v, true)
		}},
		{name: "server stream", method: nilOptWatch, policed: true, call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
			st, err := watch.Call(ctx, wrapperspb.String(v), opts...)
			if err != nil {
				return err
			}
			return exchange(st.(*grpc.GenericClientStream[sv, sv]), nil, v, false)
		}},
		{name: "bidi stream", method: nilOptChat, policed: true, call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
			st, err := chat.Call(ctx, opts...)
			return exchange(st, err, v, true)
		}},
		// Hand-written code on Client.Conn: a unary call (passed through),
		// a stream of a method with a policy, and one of none.
		{name: "Conn.Invoke", method: nilOptPlain, call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
			_, err := plain(ctx, wrapperspb.String(v), opts...)
			return err
		}},
		{name: "Conn.NewStream with a policy", method: nilOptWatch, policed: true, call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
			st, err := rawWatch(ctx, opts...)
			if err != nil {
				return err
			}
			if err := st.SendMsg(wrapperspb.String(v)); err != nil && err != io.EOF {
				return err
			}
			return exchange(st, st.CloseSend(), v, false)
		}},
		{name: "Conn.NewStream without", method: nilOptRaw, call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
			st, err := raw(ctx, opts...)
			return exchange(st, err, v, true)
		}},
	}
	return r
}

// generatedNilOptShapes are the ways of calling through generated code, on
// the example's inventory service (served healthy): the resilient client's
// cached, keyed and plain unary methods and its server stream, and the
// plain generated client built on Client.Conn, as hand-written code does.
func generatedNilOptShapes(t *testing.T) []nilOptShape {
	srv, cc := startFault(t, server.Healthy)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain := inventoryv1.NewInventoryServiceClient(c.Runtime().Conn(cc))
	inUse := func(method string) func() int {
		return func() int { n, _ := c.Runtime().BulkheadInUse(method); return n }
	}
	seen := func(method string) func() int { return func() int { return srv.Calls(method) } }
	reserve := inventoryv1.InventoryService_ReserveStock_FullMethodName
	drain := func(st grpc.ServerStreamingClient[inventoryv1.WatchStockResponse], err error) error {
		for err == nil {
			_, err = st.Recv()
		}
		if err == io.EOF || status.Code(err) == codes.Canceled {
			return nil
		}
		return err
	}
	// watch reads a few updates of the endless WatchStock, then ends it.
	watch := func(open func(context.Context) (grpc.ServerStreamingClient[inventoryv1.WatchStockResponse], error)) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := open(ctx)
		if err != nil {
			return err
		}
		if _, err := st.Recv(); err != nil {
			return err
		}
		cancel()
		return drain(st, nil)
	}
	return []nilOptShape{
		{name: "generated cached GetStock", method: atkGetStock, seen: seen(atkGetStock), inUse: inUse(atkGetStock),
			call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: v}, opts...)
				return err
			}},
		{name: "generated keyed ReserveStock", method: reserve, seen: seen(reserve),
			call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
				_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: v}, opts...)
				return err
			}},
		{name: "generated StockReport", method: atkStockReport, seen: seen(atkStockReport),
			call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
				_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{}, opts...)
				return err
			}},
		{name: "generated WatchStock", method: atkWatchStock, seen: seen(atkWatchStock), inUse: inUse(atkWatchStock),
			call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
				return watch(func(ctx context.Context) (grpc.ServerStreamingClient[inventoryv1.WatchStockResponse], error) {
					return c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: v}, opts...)
				})
			}},
		{name: "plain generated client on Conn, WatchStock", method: atkWatchStock, seen: seen(atkWatchStock), inUse: inUse(atkWatchStock),
			call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
				return watch(func(ctx context.Context) (grpc.ServerStreamingClient[inventoryv1.WatchStockResponse], error) {
					return plain.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: v}, opts...)
				})
			}},
		{name: "plain generated client on Conn, StockReport", method: atkStockReport, seen: seen(atkStockReport),
			call: func(ctx context.Context, v string, opts ...grpc.CallOption) error {
				_, err := plain.StockReport(ctx, &inventoryv1.StockReportRequest{}, opts...)
				return err
			}},
	}
}
