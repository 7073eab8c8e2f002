package runtime_test

// Attack on the cache's turns (README "Cache"): a shared call whose
// failure is its starter's own lets the next waiter call with its own
// values; a failure that is every caller's fails them all at once. gRPC's
// words for a call it refused to send are words a server can answer with
// too, and a fault of the ClientConn's or of an interceptor is no
// starter's own: only the starter's own values, looked at again, make a
// failure its own.

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // a compressor registered, for the starter that names one
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
)

// everyones24a starts A (ctx and opts its values) and 8 callers whose
// values are fine behind it; once the 9 wait, it lets A's shared call go
// on. Each of the 9 must get one failure of code and words from that one
// call (none joins the key again to call once more, one after the
// other), and the server's handler must have run wantCalls times.
func everyones24a(t *testing.T, j *join23j, aCtx func(context.Context) context.Context, aOpts []grpc.CallOption,
	code codes.Code, words string, wantCalls int) {
	t.Helper()
	const n = 8
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 1+n)
	go func() { _, err := j.get(aCtx(ctx), aOpts...); errs <- err }()
	j.gate.next(t, "A's shared call")
	for range n {
		go func() { _, err := j.get(ctx); errs <- err }()
	}
	j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
	j.gate.release <- struct{}{}
	turns := 0
	for i := 0; i < 1+n; {
		select {
		case err := <-errs:
			i++
			if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), words) {
				t.Errorf("caller %d of %d: %v, want %v %q, the failure every caller's call gets", i, 1+n, err, code, words)
			}
		case <-j.gate.arrived:
			turns++
			j.gate.release <- struct{}{} // let it go on, to count it on the server
		}
	}
	if turns != 0 {
		t.Errorf("after A's shared call failed, %d more calls were made, one waiter after the other; want none", turns)
	}
	if c := j.srv.Calls(atkGetStock); c != wantCalls {
		t.Errorf("the server's handler ran %d times, want %d", c, wantCalls)
	}
	j.wantLookups(t, 1+n)
}

func asIs(ctx context.Context) context.Context { return ctx }

// answers24a is a server that runs GetStock and answers it with code and
// msg.
func answers24a(code codes.Code, msg string) server.Behaviour {
	return func(context.Context, server.Call) error { return status.Error(code, msg) }
}

// TestAttack24aAServerAnswerInGRPCsClientWordsIsEveryWaiters: the server
// runs GetStock and answers in the words grpc-go gives a call it refused
// to send on the client's side (outgoing metadata it cannot carry, a
// compressor or codec never registered, a request past the caller's send
// limit). The call was sent and answered; every caller's call would get
// the same answer. A, whose values are fine (or whose send limit, raised,
// is not what the server quotes), starts the shared call, 8 join: each of
// the 9 gets the server's answer from that one call, and the server runs
// GetStock once. Before, the answer was taken for A's own fault, and the 8
// took turns: 9 calls, one after the other.
func TestAttack24aAServerAnswerInGRPCsClientWordsIsEveryWaiters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  codes.Code
		msg   string
		aCtx  func(context.Context) context.Context
		aOpts []grpc.CallOption
	}{
		{name: "illegal key", code: codes.Internal, msg: `header key "x-forwarded-name" contains illegal characters not in [0-9a-z-_.]`},
		{name: "illegal key that A sends, legal", code: codes.Internal, msg: `header key "x-forwarded-name" contains illegal characters not in [0-9a-z-_.]`,
			aCtx: func(ctx context.Context) context.Context {
				return metadata.AppendToOutgoingContext(ctx, "x-forwarded-name", "zoe")
			}},
		{name: "non-printable value", code: codes.Internal, msg: `header key "x-tenant" contains value with non-printable ASCII characters`},
		{name: "empty key", code: codes.Internal, msg: "there is an empty key in the header"},
		{name: "compressor", code: codes.Internal, msg: `grpc: Compressor is not installed for requested grpc-encoding "zstd"`},
		{name: "compressor, A's installed", code: codes.Internal, msg: `grpc: Compressor is not installed for requested grpc-encoding "gzip"`,
			aOpts: []grpc.CallOption{grpc.UseCompressor("gzip")}},
		{name: "codec", code: codes.Internal, msg: "no codec registered for content-subtype json"},
		{name: "send limit, A's raised", code: codes.ResourceExhausted, msg: "trying to send message larger than max (9 vs. 4)",
			aOpts: []grpc.CallOption{grpc.MaxCallSendMsgSize(1 << 20)}},
		{name: "receive limit, A's raised", code: codes.ResourceExhausted, msg: "grpc: received message larger than max (9 vs. 4)",
			aOpts: []grpc.CallOption{grpc.MaxCallRecvMsgSize(1 << 20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			j := newJoin23jOn(t, answers24a(tc.code, tc.msg))
			if tc.aCtx == nil {
				tc.aCtx = asIs
			}
			everyones24a(t, j, tc.aCtx, tc.aOpts, tc.code, tc.msg, 1)
		})
	}
}

// TestAttack24aAServersReceiveLimitIsEveryWaiters: a server's own receive
// limit (4 bytes) refuses the request: RESOURCE_EXHAUSTED "grpc: received
// message larger than max", the words of a client's receive limit. A set
// a receive limit of its own (raised) by a call option; the server's was
// not A's. Every caller's request meets it: the 9 get it from one call.
// (The handler never runs: the count is of the calls let through the
// client's gate, none after A's.)
func TestAttack24aAServersReceiveLimitIsEveryWaiters(t *testing.T) {
	atkNoLeak(t)
	j := newJoin23cWith(t, server.Healthy, []grpc.ServerOption{grpc.MaxRecvMsgSize(4)})
	everyones24a(t, j, asIs, []grpc.CallOption{grpc.MaxCallRecvMsgSize(1 << 20)}, codes.ResourceExhausted, "received message larger than max", 0)
}

// TestAttack24aTheClientConnsOrAnInterceptorsFaultIsEveryWaiters: the
// ClientConn's default call options name a codec or a compressor never
// registered, or an interceptor of the ClientConn adds metadata gRPC
// cannot carry: gRPC refuses every caller's call so, on the client's
// side. No starter's values caused it: the 9 get it at once from the one
// shared call. Before, each waiter took a turn: 9 calls refused one after
// the other.
func TestAttack24aTheClientConnsOrAnInterceptorsFaultIsEveryWaiters(t *testing.T) {
	badHeader := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, "x-trace", "caf\xe9"), method, req, reply, cc, opts...)
	}
	for _, tc := range []struct {
		name  string
		dial  grpc.DialOption
		words string
	}{
		{name: "default content-subtype", dial: grpc.WithDefaultCallOptions(grpc.CallContentSubtype("nope24a")),
			words: "no codec registered for content-subtype nope24a"},
		{name: "default compressor", dial: grpc.WithDefaultCallOptions(grpc.UseCompressor("nope24a")),
			words: `Compressor is not installed for requested grpc-encoding "nope24a"`},
		{name: "an interceptor's metadata", dial: grpc.WithChainUnaryInterceptor(badHeader),
			words: `header key "x-trace" contains value with non-printable ASCII characters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			j := newJoin23jOn(t, server.Healthy, tc.dial)
			everyones24a(t, j, asIs, nil, codes.Internal, tc.words, 0)
		})
	}
}

// TestAttack24aTheStartersOwnValuesAreStillItsOwn: A's own values that
// gRPC refuses to send (a compressor never registered, an empty key in
// metadata A built by hand, a value not printable, a send limit its
// request is past) are A's alone: the 8 who
// joined share the next call, which the server sees alone.
func TestAttack24aTheStartersOwnValuesAreStillItsOwn(t *testing.T) {
	const n = 8
	for _, tc := range []struct {
		name  string
		aCtx  func(context.Context) context.Context
		aOpts []grpc.CallOption
		code  codes.Code
		words string
	}{
		{name: "compressor", aOpts: []grpc.CallOption{grpc.UseCompressor("nope24a")}, code: codes.Internal,
			words: `Compressor is not installed for requested grpc-encoding "nope24a"`},
		{name: "empty key", code: codes.Internal, words: "there is an empty key in the header",
			aCtx: func(ctx context.Context) context.Context {
				return metadata.NewOutgoingContext(ctx, metadata.MD{"": {"acme"}})
			}},
		{name: "value", code: codes.Internal, words: `header key "x-tenant" contains value with non-printable`,
			aCtx: func(ctx context.Context) context.Context {
				return metadata.AppendToOutgoingContext(ctx, "x-tenant", "a\x01")
			}},
		{name: "send limit", aOpts: []grpc.CallOption{grpc.MaxCallSendMsgSize(2)}, code: codes.ResourceExhausted,
			words: "trying to send message larger than max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			j := newJoin23j(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if tc.aCtx == nil {
				tc.aCtx = asIs
			}
			aErr := make(chan error, 1)
			go func() { _, err := j.get(tc.aCtx(ctx), tc.aOpts...); aErr <- err }()
			j.gate.next(t, "A's shared call")
			results := j.goods(ctx, n)
			j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
			j.gate.release <- struct{}{}
			if err := <-aErr; status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.words) {
				t.Errorf("caller A: %v, want %v %q for its own values", err, tc.code, tc.words)
			}
			j.theRestShareOne(t, results, n, "A's was")
			j.wantLookups(t, 1+n)
		})
	}
}

// TestAttack24aAServersMarshalFailureIsEveryWaitersWhatEverTheCodec: the
// server fails to marshal its reply (INTERNAL "grpc: error while
// marshaling", the words of a request that does not marshal) and A chose
// a codec by a call option, one that marshals A's request. The call was
// run; every caller's would end so: the 9 get it from one call. Before, a
// codec option made any marshal failure A's own, and the 8 took turns.
func TestAttack24aAServersMarshalFailureIsEveryWaitersWhatEverTheCodec(t *testing.T) {
	atkNoLeak(t)
	j := newJoin23cWith(t, server.Healthy, []grpc.ServerOption{grpc.ForceServerCodecV2(replyFails23c{})})
	everyones24a(t, j, asIs, []grpc.CallOption{grpc.ForceCodecV2(replyFails23c{})}, codes.Internal, "error while marshaling", 1)
}
