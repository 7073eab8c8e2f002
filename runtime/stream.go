package runtime

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Conn wraps cc so that streams opened through it get their method's
// bulkhead, circuit breaker and timeout. Unary calls pass through unchanged:
// their handles (UnaryHandle) apply their policy.
//
// SendMsg refuses a nil message (INVALID_ARGUMENT, nothing sent, the
// stream still open; a server stream's nil request ends it, see SendMsg),
// as a unary handle refuses a nil request; Invoke and NewStream refuse a
// call option that is nil or holds a nil, as the handles do (see
// refuseNilOptions), and NewStream a nil *grpc.StreamDesc.
//
// A stream holds its bulkhead permit until it ends, and gives it back at
// once on every ending: its last message (the response of a client stream),
// an error or io.EOF from RecvMsg, a failed SendMsg (io.EOF included: the
// stream is over on the wire), a Header of (nil, nil) (likewise), a panic
// in its calls, or its context ending. Its outcome is told to the breaker
// once: at the first message received (a success) or at the end,
// whichever comes first.
// The method's OverallTimeout, or else its Timeout, bounds the whole
// stream. Streams are never retried. A stream never holds a half-open probe
// of a breaker that a unary method also goes through: opened while that
// breaker is half-open, it goes through beside the probes; its failure
// opens the breaker again, its success is not counted, and the unary
// calls' probes decide whether it closes.
func (c *Client) Conn(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
	if nilIn(cc) != "" {
		cc = nil // (*grpc.ClientConn)(nil), from a failed grpc.NewClient: each call fails FAILED_PRECONDITION
	}
	w := &conn{cc: cc, c: c, probes: map[*methodState]bool{}}
	unary := map[*breaker]bool{}
	for _, m := range c.methods {
		if m.breaker != nil && m.policy.Kind == policy.KindUnary {
			unary[m.breaker] = true
		}
	}
	for _, m := range c.methods {
		w.probes[m] = m.breaker != nil && !unary[m.breaker]
	}
	return w
}

type conn struct {
	cc grpc.ClientConnInterface
	c  *Client
	// probes says, per method, whether its streams may take a half-open
	// probe: only when no unary method shares its breaker.
	probes map[*methodState]bool
}

// Invoke passes a unary call through, but refuses a call option that is
// nil or holds a nil (refuseNilOptions: INVALID_ARGUMENT, nothing sent),
// for hand-written code calling through Conn as for the handles, whose
// options it sees again at each attempt (grpc-go's and the runtime's own
// are looked at by their type alone).
func (w *conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if w.cc == nil {
		return refusedWith(opts, nilConnError(method))
	}
	if err := refuseNilOptions(method, callersOptions(opts)); err != nil {
		return refusedWith(opts, err)
	}
	return w.cc.Invoke(ctx, method, args, reply, opts...)
}

// callersOptions returns the options of a call through the conn as its
// caller gave them, so that a refusal names the caller's place: without the
// grpc.StaticMethod that protoc-gen-go-grpc's plain client puts first.
func callersOptions(opts []grpc.CallOption) []grpc.CallOption {
	if len(opts) != 0 {
		if _, ok := opts[0].(grpc.StaticMethodCallOption); ok {
			return opts[1:]
		}
	}
	return opts
}

// nilConnError is returned by a client built on a nil connection, at its
// first call: the generated constructors have no way to refuse one without
// changing their signature.
func nilConnError(method string) error {
	return misuseError(codes.FailedPrecondition, method, "the client was built on a nil grpc.ClientConnInterface: pass the connection from grpc.NewClient")
}

func (w *conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if w.cc == nil {
		return nil, refusedWith(opts, nilConnError(method))
	}
	// A nil in an option is refused on every method, one with no policy
	// too: for a stream grpc-go would panic on the goroutine it ends the
	// stream on, which ends the program.
	if err := refuseNilOptions(method, callersOptions(opts)); err != nil {
		return nil, refusedWith(opts, err)
	}
	if desc == nil {
		// Hand-written code: the generated clients pass their service
		// descriptor's. grpc-go would open a stream it cannot describe.
		return nil, refusedWith(opts, misuseError(codes.InvalidArgument, method,
			"nil *grpc.StreamDesc given to NewStream: pass the method's descriptor from the service's grpc.ServiceDesc"))
	}
	m := w.c.byName[method]
	if m == nil {
		return w.cc.NewStream(ctx, desc, method, opts...)
	}
	if ctx == nil {
		return nil, refusedWith(opts, nilContextError(method))
	}
	if err := over(ctx); err != nil {
		// Already over: answered here, without a permit, a probe or an
		// outcome.
		return nil, refusedWith(opts, statusFromContext(err))
	}
	s := &stream{m: m, callerCtx: ctx, final: !desc.ServerStreams, oneRequest: !desc.ClientStreams}
	if m.bulkhead != nil {
		if _, err := m.acquirePermit(ctx); err != nil {
			return nil, refusedWith(opts, err)
		}
		s.holdsPermit = true
	}
	// A panic before the stream is opened, in the breaker's admission (an
	// observer of its transition to half-open) or in opening the stream
	// (an interceptor), gives back what the stream holds, then goes on to
	// the caller.
	opened := false
	defer func() {
		if !opened {
			s.finish(errPanicked)
		}
	}()
	t, start, retryAfter, ok := m.admitAs(w.probes[m])
	if !ok && retryAfter == 0 && w.probes[m] {
		// The probes were out: a stream holding one may have had its
		// context ended just now (see streamSet), and reap frees its
		// place; or its AfterFunc freed it since admitAs looked, and reap
		// finds nothing. Either way, the place may be free: ask again.
		m.breaker.streams.reap()
		t, start, retryAfter, ok = m.admitAs(true)
	}
	if !ok {
		opened = true
		s.release()
		m.breakerRefused(false)
		return nil, refusedWith(opts, circuitOpenError(m.dependency(), method, retryAfter, nil))
	}
	s.ticket, s.start, s.admitted = t, start, true
	var sctx context.Context
	if limit := bound.Call(m.policy); limit > 0 {
		sctx, s.cancel = context.WithTimeout(ctx, limit)
	} else {
		sctx, s.cancel = context.WithCancel(ctx)
	}
	if s.oneRequest && hasOnFinish(opts) {
		opts = s.finishingAsTheCaller(opts)
	}
	cs, err := w.cc.NewStream(sctx, desc, method, opts...)
	opened = true
	if err != nil {
		s.finish(unsent(err)) // a closed ClientConn says nothing, as for a unary attempt
		return nil, err
	}
	s.ClientStream = cs
	s.ctx = sctx
	if s.holdsPermit {
		m.bulkhead.streams.add(s)
	}
	if s.probing() {
		m.breaker.streams.add(s)
	}
	// Whatever the caller does with the stream, the end of its context frees
	// the permit (finish runs once; a later call is a no-op).
	context.AfterFunc(sctx, s.contextEnded)
	return s, nil
}

// finishingAsTheCaller returns opts with each grpc.OnFinish callback of a
// server stream wrapped, so that it runs with the error the plain client's
// method returned when the runtime ended the stream before that method
// returned it (s.callerErr), and with gRPC's own otherwise. gRPC runs the
// callbacks once its stream is over, after the runtime's cancel, so the
// error is stored by then.
func (s *stream) finishingAsTheCaller(opts []grpc.CallOption) []grpc.CallOption {
	out := make([]grpc.CallOption, len(opts))
	for i, o := range opts {
		if f, ok := o.(grpc.OnFinishCallOption); ok {
			fn := f.OnFinish
			o = grpc.OnFinish(func(err error) {
				if e := s.callerErr.Load(); e != nil {
					err = *e
				}
				fn(err)
			})
		}
		out[i] = o
	}
	return out
}

// stream is a grpc.ClientStream that tells its method's breaker and
// bulkhead when it ends.
type stream struct {
	grpc.ClientStream
	m           *methodState
	callerCtx   context.Context
	final       bool // the stream answers with one message (not server-streaming): it ends with it
	oneRequest  bool // the stream sends one message (server-streaming): a nil one refused before it ends it
	requestSent bool // a oneRequest stream sent its request (SendMsg's alone: gRPC allows no two at once)
	holdsPermit bool // a permit of m.bulkhead is taken, to give back once
	releasing   sync.Mutex
	released    bool   // guarded by releasing
	admitted    bool   // ticket is to be given back
	ticket      ticket // of m.breaker, if any
	start       int64  // nanoseconds since the client's base, when admit read it
	cancel      context.CancelFunc
	ctx         context.Context // the stream's own, set once it is open

	once     sync.Once
	mu       sync.Mutex
	recorded bool        // guarded by mu
	settled  atomic.Bool // set once recorded's settle has run
	// overOnWire says the stream was seen over on the wire (Send's
	// io.EOF, Header's (nil, nil)) before its status was read: its
	// context's end then ends it as errUnread, not as the context's error.
	overOnWire atomic.Bool
	// callerErr is the error the plain client's server-streaming method
	// returned without the stream, when the runtime ended it there (a nil
	// request, a failed CloseSend): the caller's grpc.OnFinish runs with it,
	// not with the CANCELLED gRPC then ends its stream with (see
	// finishingAsTheCaller).
	callerErr atomic.Pointer[error]
	// busy counts the stream's calls in progress (SendMsg, RecvMsg,
	// Header, CloseSend, Trailer), plus endPending once the context
	// ended while one was: the ending is then theirs (see contextEnded
	// and leave).
	busy atomic.Int64
}

// endPending, in stream.busy, says the stream's context ended while one of
// its calls was in progress; the count of calls is in the bits below.
const endPending = 1 << 40

// SendMsg sends a message. A failure of its own making (a message that
// does not marshal; grpc ends the stream) ends the stream's hold at once
// and says nothing about the dependency. io.EOF says the stream is over
// on the wire (the server ended it, or the connection broke): the permit
// goes back at once, since many callers return on that error without
// reading the status, and the outcome waits for RecvMsg, which returns the
// status, or for the context's end, which then tells nothing (errUnread).
//
// A nil message (nil, or a nil pointer to a generated message) is refused
// with INVALID_ARGUMENT, as a unary handle refuses a nil request: gRPC
// would send it as an empty message, which is never what the caller
// meant. Nothing is sent. On a client or bidirectional stream, the
// stream, its permit and its ticket stay as they were: the caller may send
// again. A server stream sends its one request inside the plain client's
// method, which returns the error without the stream, leaving its caller
// nothing to cancel: a nil refused before its request ends it there, its
// hold given back as for a message that does not marshal (a nil sent
// after the request, by hand-written code, is refused and leaves it
// open, as on the other streams).
func (s *stream) SendMsg(msg any) error {
	if nilMessage(msg) {
		if s.oneRequest && !s.requestSent {
			err := misuseError(codes.InvalidArgument, s.m.policy.Name,
				"nil request of a server stream: nothing was sent and the stream is ended; pass a request")
			s.callerErr.Store(&err)
			s.finish(&clientFault{err: err})
			return err
		}
		return misuseError(codes.InvalidArgument, s.m.policy.Name,
			"nil message sent on the stream: nothing was sent and the stream stays open; send a message, or CloseSend to end the requests")
	}
	counted := s.enter()
	returned := false
	defer s.leave(&returned, counted)
	err := s.ClientStream.SendMsg(msg)
	returned = true
	switch {
	case err == nil:
		if s.oneRequest {
			s.requestSent = true
		}
	case err == io.EOF:
		s.overAt()
		s.release()
	case err != nil:
		s.finish(&clientFault{err: err})
	}
	return err
}

// nilMessage reports whether msg, given to SendMsg, is no message: nil, or
// a nil pointer to a generated message (whose reflection is not valid).
func nilMessage(msg any) bool {
	if msg == nil {
		return true
	}
	pm, ok := msg.(proto.Message)
	return ok && !pm.ProtoReflect().IsValid()
}

// Header returns the server's header. gRPC answers (nil, nil) once the
// stream is over without one (a server that failed it at once): the
// permit goes back then, as for SendMsg's io.EOF, since a caller that
// reads the header first may stop there; the outcome waits for RecvMsg,
// which returns the status, or for the context's end, which then tells
// nothing (errUnread).
func (s *stream) Header() (metadata.MD, error) {
	counted := s.enter()
	returned := false
	defer s.leave(&returned, counted)
	md, err := s.ClientStream.Header()
	returned = true
	if md == nil || err != nil {
		s.overAt()
		s.release()
	}
	return md, err
}

func (s *stream) RecvMsg(msg any) error {
	counted := s.enter()
	returned := false
	defer s.leave(&returned, counted)
	err := s.ClientStream.RecvMsg(msg)
	returned = true
	switch {
	case err == io.EOF:
		s.finish(nil)
	case err != nil:
		s.finish(unsent(err)) // a message past a size limit says nothing, as for a unary attempt
	case s.final:
		// The one response of a client stream: gRPC returns nil, not
		// io.EOF, and the stream is over.
		s.finish(nil)
	default:
		s.record(nil)
	}
	return err
}

// CloseSend closes the sending side. gRPC's own never fails; an error
// comes from an interceptor's stream, which gRPC then considers closed, so
// it ends the stream's hold at once as a failure of the client's side (it
// says nothing about the dependency): the generated server-streaming
// method returns that error without the stream, and its caller has nothing
// left to cancel or read.
func (s *stream) CloseSend() error {
	counted := s.enter()
	returned := false
	defer s.leave(&returned, counted)
	err := s.ClientStream.CloseSend()
	returned = true
	if err != nil {
		if s.oneRequest {
			s.callerErr.Store(&err)
		}
		s.finish(&clientFault{err: err})
	}
	return err
}

// Trailer returns the server's trailer. gRPC allows it only once the
// stream is over, so the hold has ended already; a panic in it (an
// interceptor's) ends the hold all the same, as in the other calls.
func (s *stream) Trailer() metadata.MD {
	counted := s.enter()
	returned := false
	defer s.leave(&returned, counted)
	md := s.ClientStream.Trailer()
	returned = true
	return md
}

// enter counts a call of the stream in progress in s.busy, while the
// stream's ending may still run an observer (see contextEnded); it reports
// whether it counted the call, for leave. Past the stream's first message
// (its outcome told) or without an observer or a logger, a call is not
// counted: nothing in the ending can panic then, and the context's end
// ends the stream wherever it is noticed.
func (s *stream) enter() bool {
	if s.settled.Load() || !s.observable() {
		return false
	}
	s.busy.Add(1)
	return true
}

// leave, deferred by each of the stream's calls, ends the stream's hold
// when the call did not return (it panicked: a codec, an interceptor; the
// panic goes on to the caller, unrecovered). For a call enter counted, it
// also ends the stream when its context is over: the context may end
// during the call without the call ending the stream (a header, a message
// already received, Send's io.EOF), before or after the AfterFunc has run.
// The call stays counted until then, so that contextEnded leaves the
// ending to it; and when contextEnded found it counted (endPending), it
// ends the stream however its context looked.
func (s *stream) leave(returned *bool, counted bool) {
	if !*returned {
		s.finish(errPanicked)
	}
	if !counted {
		return
	}
	if s.ctx.Err() != nil {
		s.finish(s.contextEnd())
	}
	if s.busy.Add(-1) == endPending {
		s.finish(s.contextEnd())
	}
}

// contextEnded is the stream's ending at the end of its context, run by
// context.AfterFunc on a goroutine of its own. An ending that tells the
// breaker an outcome may move it, and an observer (or the logger's
// handler) of the transition runs there; a panic in it must reach the
// stream's caller, not end the program from a goroutine of the runtime.
// So while one of the stream's calls is in progress (a Recv waiting on
// the server, which gRPC wakes with the context's error), that call ends
// the stream as it returns, and only the permit goes back here, at once.
// With no call in progress the ending runs here, and a panic in it, with
// no caller to go to, ends the program as a panic on any goroutine does.
// An ending that can run no observer runs here in any case: the probe it
// holds is then free at once too.
func (s *stream) contextEnded() {
	err := s.contextEnd()
	if s.endingObserved(err) && s.busy.Or(endPending) != 0 {
		s.release()
		return
	}
	s.finish(err)
}

// reaped ends s, whose context is over, for a call of the same bulkhead or
// breaker on another goroutine (see streamSet): the whole ending when it
// can run no observer, else only the permit, the rest left to the
// stream's own call or its AfterFunc (contextEnded), so that a panic in an
// observer never reaches a caller that has nothing to do with the stream.
func (s *stream) reaped() {
	if err := s.contextEnd(); !s.endingObserved(err) {
		s.finish(err)
		return
	}
	s.release()
}

// overAt notes that a call of the stream found it over (Send's io.EOF,
// Header's (nil, nil)) while its context was not: the server ended it.
// gRPC answers so at the context's end too, which then ends it as that;
// and at its deadline a context gRPC derives with the same deadline (its
// own timer) may end a moment before the stream's, so a deadline passed
// counts as the context's end.
func (s *stream) overAt() {
	if s.ctx.Err() != nil {
		return
	}
	if d, ok := s.ctx.Deadline(); ok && !time.Now().Before(d) {
		return
	}
	s.overOnWire.Store(true)
}

// contextEnd is what the end of the stream's context tells of it: the
// context's error, or errUnread for a stream already over on the wire
// whose status nobody read (see errUnread).
func (s *stream) contextEnd() error {
	if s.overOnWire.Load() {
		return errUnread
	}
	return s.ctx.Err()
}

// errUnread ends a stream that was over on the wire (Send's io.EOF,
// Header's (nil, nil)) before its context ended, its status never read by
// a Recv: the server ended it, not the deadline, and with what status only
// Recv could have said. It tells the breaker nothing and is counted under
// CANCELLED, as the same stream is when its caller cancels it (a deferred
// cancel); told as the context's DEADLINE_EXCEEDED, a healthy server that
// ends its streams early with OK would open its callers' breaker.
var errUnread error = &clientFault{err: status.Error(codes.Canceled, "resilient: the stream was over on the wire and its status was never read")}

// endingObserved reports whether ending the stream with err may run an
// observer or the logger: only a transition of the breaker does, and only
// an outcome still to be told that is not ignored (a stream its caller
// cancelled, or that failed on the client's side, tells none) can make
// one.
func (s *stream) endingObserved(err error) bool {
	if s.settled.Load() || !s.observable() {
		return false
	}
	o, _ := s.m.verdict(s.callerCtx, err, markUnread)
	return o != outcomeIgnored
}

// record tells the breaker the stream's outcome, and counts it as an
// attempt, once.
func (s *stream) record(err error) {
	if s.settled.Load() {
		return // every message after the first: no lock
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recorded || !s.admitted {
		return
	}
	s.recorded = true
	s.m.settleAs(s.callerCtx, s.ticket, s.start, err, false)
	s.settled.Store(true)
}

// finish ends the stream's hold on the runtime: records its outcome if not
// yet done, frees its permit and its context. It runs once: the permit and
// the context are freed even when recording panics (an observer of the
// breaker's transition), since no later ending would free them.
func (s *stream) finish(err error) {
	s.once.Do(func() {
		defer s.release()
		if s.probing() {
			defer s.m.breaker.streams.remove(s)
		}
		if s.cancel != nil {
			defer s.cancel()
		}
		s.record(err)
	})
}

// observable reports whether telling the stream's outcome can run an
// observer or the logger at all: it has a breaker's ticket, and the client
// reports events.
func (s *stream) observable() bool {
	return s.admitted && s.m.breaker != nil && s.m.client.events != nil
}

// probing reports whether s is counted in m.breaker.streams, as holding
// a half-open probe: its ticket is a probe's, and it was opened (a stream
// that failed to open, or whose opening panicked, was never counted).
func (s *stream) probing() bool {
	return s.ticket.probe && s.ctx != nil
}

// release gives back the stream's permit, once, whichever ending comes
// first (a SendMsg's io.EOF may race with the context's end). When it
// returns the permit is back, whoever gave it: an ending that comes while
// another gives it back (the AfterFunc's, at a Recv's error) waits for
// that, so that its caller never finds the permit still taken.
func (s *stream) release() {
	if !s.holdsPermit {
		return
	}
	s.releasing.Lock()
	defer s.releasing.Unlock()
	if s.released {
		return
	}
	s.released = true
	if s.ctx != nil {
		s.m.bulkhead.streams.remove(s)
	}
	s.m.releasePermit()
}
