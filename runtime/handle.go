package runtime

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

// UnaryHandle is one unary method of a Client, bound by its full name to
// the method's policy and typed by its request and response. A generated
// client builds one per unary method in its constructor (NewUnary) and
// calls it from the method: return c.getStock.Call(ctx, in, opts...).
type UnaryHandle[Req, Resp any] struct {
	m     *methodState
	call  func(context.Context, *Req, ...grpc.CallOption) (*Resp, error)
	hooks UnaryHooks[Req, Resp]
	// generatesKey: the policy in force has every call send a key of the
	// runtime's (GenerateIdempotencyKey). With hooks.IdempotencyKey (a key
	// field), the header is the runtime's alone (see withoutForwardedKey).
	generatesKey bool
}

// UnaryHooks are what generated code knows of a unary method besides its
// policy: how to read the keys of a request, and the caller's fallback.
// Every field may be nil.
type UnaryHooks[Req, Resp any] struct {
	// IdempotencyKey returns the request's idempotency key, the field the
	// policy's IdempotencyKey names ("" when it has no value: the call is
	// then not retried). Needed when the policy names a key field.
	IdempotencyKey func(*Req) string
	// CacheKey returns the key the request is cached under, made of the
	// fields of the policy's Cache.KeyFields. Needed when the policy has a
	// cache.
	CacheKey func(*Req) string
	// Fallback answers a call that failed on the dependency's side or was
	// refused by the runtime (see UnaryHandle.Call).
	Fallback Fallback[Req, Resp]
}

// Fallback is the type of a method's fallback, the XxxFallback fields of
// the generated options: it receives the request and the call's final
// error, and what it returns is returned to the caller. See UnaryHandle.Call for when
// it is called.
type Fallback[Req, Resp any] = func(ctx context.Context, req *Req, err error) (*Resp, error)

// NewUnary binds the unary method named method ("/pkg.Service/Method", the
// _FullMethodName constant of protoc-gen-go-grpc's output) of c: call is the
// plain generated client's method, hooks what the generated code reads of a
// request. It fails, naming the method, when c's policy has no entry of
// that name or one of another kind, or asks for a key that hooks cannot
// read: a method is never run under another's policy, nor a key silently
// left out.
func NewUnary[Req, Resp any](c *Client, method string,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error),
	hooks UnaryHooks[Req, Resp]) (*UnaryHandle[Req, Resp], error) {
	m, err := c.bind(method, "unary", policy.KindUnary)
	if err != nil {
		return nil, err
	}
	if call == nil {
		return nil, fmt.Errorf("resilient: %s: nil call: pass the plain client's method", method)
	}
	p := m.policy
	if p.IdempotencyKey != "" && hooks.IdempotencyKey == nil {
		return nil, fmt.Errorf("resilient: policy %s: method %s: IdempotencyKey %q, but the generated client "+
			"reads no key of its requests: annotate idempotency_key in the .proto and regenerate",
			c.policy.Name, method, p.IdempotencyKey)
	}
	if p.Cache != nil && hooks.CacheKey == nil {
		return nil, fmt.Errorf("resilient: policy %s: method %s: a Cache, but the generated client makes no "+
			"cache key of its requests: annotate the cache in the .proto and regenerate", c.policy.Name, method)
	}
	if p.IdempotencyKey == "" {
		hooks.IdempotencyKey = nil // the policy in force sends no key
	}
	if p.Cache == nil {
		hooks.CacheKey = nil
	}
	return &UnaryHandle[Req, Resp]{m: m, call: call, hooks: hooks, generatesKey: p.GenerateIdempotencyKey}, nil
}

// Call runs one call of the method under its policy. It refuses a nil
// context, request or call option, and an idempotency key that cannot
// travel (a byte outside printable ASCII, or longer than the server keeps:
// see refuseKey), with INVALID_ARGUMENT, nothing sent, and answers a
// context already done with its error, before any layer. It sends the
// method's annotated priority (see policy.Method.Priority) and reads the
// request's idempotency key, sent as idempotency-key metadata on every
// attempt (without it a method that is not idempotent is never retried);
// for a method whose policy sends a key (a key field, or a generated key),
// an idempotency-key the caller's outgoing metadata already carries (its
// own incoming metadata, forwarded) is not sent. A call that sends a key,
// read or generated, writes its request deterministically (see
// withKeyedCodec): the same bytes on every attempt and hedged copy, and on
// every call of the same request, so that a server hashing fields it does
// not know as sent (a map the schema it runs lacks) sees one request, not
// several.
//
// The layers, outside in: the cache, when the method has one (a fresh
// answer is returned without calling; the callers of one key share one
// call; a stale answer stands in for a failure: see policy.Cache), the
// fallback, the rate limit, the bulkhead, the overall limit, the retry
// loop or hedging (retry budget, backoff with full jitter, never past the
// deadline), the circuit breaker (admits each attempt, records its
// outcome), the per-attempt timeout, the call. The fallback answers a call
// that failed on the dependency's side or was refused by the runtime,
// never an answer such as NOT_FOUND, nor the caller's cancellation.
func (h *UnaryHandle[Req, Resp]) Call(ctx context.Context, req *Req, opts ...grpc.CallOption) (*Resp, error) {
	if h == nil {
		return nil, refusedWith(opts, notBuiltError())
	}
	m := h.m
	// refuse's checks, the common call (no option of the caller's) made
	// here without a call.
	if m == nil || ctx == nil || req == nil || len(opts) != 0 {
		if err := refuse(m, ctx, req == nil, opts); err != nil {
			return nil, err
		}
		if rest, fins := onFinishOf(opts); fins != nil {
			// The caller's grpc.OnFinish runs once, with what the caller
			// gets (a refusal, a fallback's or a cache's answer
			// included), not once per attempt or hedged copy, nor on the
			// goroutine of a cache's shared call. The options are checked.
			return h.finishing(ctx, req, rest, fins)
		}
	}
	// What follows is written again in finishing: a change here is one
	// there.
	if h.hooks.IdempotencyKey != nil || h.generatesKey {
		// The call's key is the request's (or generated): an
		// idempotency-key forwarded with the caller's metadata is not
		// sent beside it, nor in its place.
		ctx = withoutForwardedKey(ctx)
	}
	if m.hot.prioritized {
		ctx = prioritize(ctx, m)
	}
	key := ""
	if h.hooks.IdempotencyKey != nil {
		if key = h.hooks.IdempotencyKey(req); key != "" {
			if err := refuseKey(m, key); err != nil {
				return nil, err
			}
		}
	}
	if key != "" || h.generatesKey {
		opts = withKeyedCodec(opts)
	}
	if h.hooks.CacheKey != nil || h.hooks.Fallback != nil {
		return callUnary(ctx, m, key, h.hooks.CacheKey, req, opts, h.call, h.hooks.Fallback)
	}
	// callUnary without a cache or a fallback, written out: one call frame
	// less on every call of the common method.
	now, err := overAt(ctx)
	if err != nil {
		return nil, statusFromContext(err)
	}
	resp, err := unary(ctx, m, key, nil, &invocation[Req, Resp]{req: req, opts: opts, call: h.call, start: m.startOf(now)})
	if err == nil && m.client.events != nil && m.fallbackSeen.Load() != 0 {
		m.fallbackSeen.Store(0) // as callUnary: another handle of m may fall back
	}
	return resp, err
}

// finishing is Call of a call given grpc.OnFinish, once Call checked its
// options: opts are the others, fins the callbacks, run once with what the
// caller gets. It does what Call does after its checks, written out again:
// calling Call with opts would check them again (refuse, onFinishOf), and
// moving what Call does into a function both call would cost every call,
// with OnFinish or not, a frame. A change to one is a change to the other
// (TestOnFinish23IsTheCallWithoutIt checks they send the same).
func (h *UnaryHandle[Req, Resp]) finishing(ctx context.Context, req *Req, opts []grpc.CallOption, fins []func(error)) (*Resp, error) {
	m := h.m
	if h.hooks.IdempotencyKey != nil || h.generatesKey {
		ctx = withoutForwardedKey(ctx)
	}
	if m.hot.prioritized {
		ctx = prioritize(ctx, m)
	}
	key := ""
	if h.hooks.IdempotencyKey != nil {
		if key = h.hooks.IdempotencyKey(req); key != "" {
			if err := refuseKey(m, key); err != nil {
				finished(fins, err)
				return nil, err
			}
		}
	}
	if key != "" || h.generatesKey {
		opts = withKeyedCodec(opts)
	}
	// callUnary, not Call's written-out call without a cache or a
	// fallback: the same, one frame more, on this path only.
	resp, err := callUnary(ctx, m, key, h.hooks.CacheKey, req, opts, h.call, h.hooks.Fallback)
	finished(fins, err)
	return resp, err
}

// ServerStreamHandle is one server-streaming method of a Client, bound by
// its full name. The stream is opened through the connection Client.Conn
// wraps, which applies the method's bulkhead, breaker and timeout.
type ServerStreamHandle[Req, Resp any] struct {
	m    *methodState
	open func(context.Context, *Req, ...grpc.CallOption) (grpc.ServerStreamingClient[Resp], error)
}

// NewServerStream binds the server-streaming method named method of c;
// open is the plain generated client's method, built on c.Conn. It fails
// as NewUnary does.
func NewServerStream[Req, Resp any](c *Client, method string,
	open func(context.Context, *Req, ...grpc.CallOption) (grpc.ServerStreamingClient[Resp], error),
) (*ServerStreamHandle[Req, Resp], error) {
	m, err := c.bind(method, "server-streaming", policy.KindServerStreaming)
	if err != nil {
		return nil, err
	}
	if open == nil {
		return nil, fmt.Errorf("resilient: %s: nil open: pass the plain client's method", method)
	}
	return &ServerStreamHandle[Req, Resp]{m: m, open: open}, nil
}

// Call opens the stream: it refuses a nil context, request or call
// option (INVALID_ARGUMENT, nothing sent) and sends the method's priority.
func (h *ServerStreamHandle[Req, Resp]) Call(ctx context.Context, req *Req,
	opts ...grpc.CallOption) (grpc.ServerStreamingClient[Resp], error) {
	if h == nil {
		return nil, refusedWith(opts, notBuiltError())
	}
	if err := refuse(h.m, ctx, req == nil, opts); err != nil {
		return nil, err
	}
	return h.open(prioritize(ctx, h.m), req, opts...)
}

// StreamHandle is one client-streaming or bidirectional method of a
// Client, bound by its full name; S is the stream type the plain client
// returns (grpc.ClientStreamingClient or grpc.BidiStreamingClient). The
// stream is opened through the connection Client.Conn wraps, which applies
// the method's bulkhead, breaker and timeout.
type StreamHandle[S any] struct {
	m    *methodState
	open func(context.Context, ...grpc.CallOption) (S, error)
}

// NewStream binds the client-streaming or bidirectional method named
// method of c; open is the plain generated client's method, built on
// c.Conn. It fails as NewUnary does.
func NewStream[S any](c *Client, method string,
	open func(context.Context, ...grpc.CallOption) (S, error)) (*StreamHandle[S], error) {
	m, err := c.bind(method, "client-streaming or bidirectional", policy.KindClientStreaming, policy.KindBidiStreaming)
	if err != nil {
		return nil, err
	}
	if open == nil {
		return nil, fmt.Errorf("resilient: %s: nil open: pass the plain client's method", method)
	}
	return &StreamHandle[S]{m: m, open: open}, nil
}

// Call opens the stream: it refuses a nil context or call option
// (INVALID_ARGUMENT) and sends the method's priority.
func (h *StreamHandle[S]) Call(ctx context.Context, opts ...grpc.CallOption) (S, error) {
	if h == nil {
		var none S
		return none, refusedWith(opts, notBuiltError())
	}
	if err := refuse(h.m, ctx, false, opts); err != nil {
		var none S
		return none, err
	}
	return h.open(prioritize(ctx, h.m), opts...)
}

// refuse is what every handle checks before any layer: that it was built
// (m not nil), that ctx is not nil, for a call given a request that the
// request is not nil (nilReq), and that no call option is nil nor holds a
// nil grpc-go would panic on (see refuseNilOptions). Nothing is sent; each
// is INVALID_ARGUMENT, but a handle never built, FAILED_PRECONDITION. The
// caller's grpc.OnFinish callbacks run with the refusal (refusedWith).
func refuse(m *methodState, ctx context.Context, nilReq bool, opts []grpc.CallOption) error {
	var err error
	switch {
	case m == nil:
		err = notBuiltError()
	case ctx == nil:
		err = nilContextError(m.policy.Name)
	case nilReq:
		err = nilRequestError(m.policy.Name)
	default:
		err = refuseNilOptions(m.policy.Name, opts)
	}
	if err != nil {
		return refusedWith(opts, err)
	}
	return nil
}

// refuseNilOptions refuses a call or stream of method given a call option
// that is nil or holds a nil (nilIn): grpc-go would panic on it inside the
// call, after the layers took a token, a permit or a probe, or on the
// goroutine of a cache's shared call, or, for a stream, on the goroutine
// gRPC ends it on, which ends the program. The error is INVALID_ARGUMENT,
// naming the option by its place and saying what in it is nil. A call
// given no options pays nothing but the loop's test.
func refuseNilOptions(method string, opts []grpc.CallOption) error {
	for i, o := range opts {
		if what := nilIn(o); what != "" {
			return misuseError(codes.InvalidArgument, method, fmt.Sprintf("call option %d %s", i, what))
		}
	}
	return nil
}

// notBuiltError is returned by a handle that was never built (nil, as in
// the zero value of a generated client, or a zero UnaryHandle{}).
func notBuiltError() error {
	return misuseError(codes.FailedPrecondition, "", "client not built: use the generated New…ResilientClient")
}
