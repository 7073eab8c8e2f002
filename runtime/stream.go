package runtime

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Conn wraps cc so that streams opened through it get their method's
// bulkhead, circuit breaker and timeout. Unary calls pass through unchanged:
// generated code applies their policy with Unary.
//
// A stream holds its bulkhead permit until it ends (an error or io.EOF from
// RecvMsg, or its context ending). Its outcome is told to the breaker once:
// at the first message received (a success) or at the end, whichever comes
// first. The method's OverallTimeout, or else its Timeout, bounds the whole
// stream. Streams are never retried.
func (c *Client) Conn(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
	return &conn{cc: cc, c: c}
}

type conn struct {
	cc grpc.ClientConnInterface
	c  *Client
}

func (w *conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if w.cc == nil {
		return nilConnError(method)
	}
	return w.cc.Invoke(ctx, method, args, reply, opts...)
}

// nilConnError is returned by a client built on a nil connection, at its
// first call: the generated constructors have no way to refuse one without
// changing their signature.
func nilConnError(method string) error {
	return misuseError(codes.FailedPrecondition, method, "the client was built on a nil grpc.ClientConnInterface: pass the connection from grpc.NewClient")
}

func (w *conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if w.cc == nil {
		return nil, nilConnError(method)
	}
	m := w.c.byName[method]
	if m == nil {
		return w.cc.NewStream(ctx, desc, method, opts...)
	}
	if ctx == nil {
		return nil, nilContextError(method)
	}
	s := &stream{m: m, callerCtx: ctx}
	if m.bulkhead != nil {
		if err := m.acquirePermit(ctx); err != nil {
			return nil, err
		}
		s.holdsPermit = true
	}
	t, start, retryAfter, ok := m.admit()
	if !ok {
		s.release()
		m.breakerRefused(false)
		return nil, circuitOpenError(m.dependency(), method, retryAfter, nil)
	}
	s.ticket, s.start = t, start
	var sctx context.Context
	if limit := m.policy.callLimit(); limit > 0 {
		sctx, s.cancel = context.WithTimeout(ctx, limit)
	} else {
		sctx, s.cancel = context.WithCancel(ctx)
	}
	// Whatever the caller does with the stream, the end of its context frees
	// the permit (finish runs once; a later call is a no-op).
	context.AfterFunc(sctx, func() { s.finish(sctx.Err()) })
	cs, err := w.cc.NewStream(sctx, desc, method, opts...)
	if err != nil {
		s.finish(err)
		return nil, err
	}
	s.ClientStream = cs
	return s, nil
}

// stream is a grpc.ClientStream that tells its method's breaker and
// bulkhead when it ends.
type stream struct {
	grpc.ClientStream
	m           *Method
	callerCtx   context.Context
	holdsPermit bool   // a permit of m.bulkhead is held until finish
	ticket      Ticket // of m.breaker, if any
	start       int64  // nanoseconds since the client's base, when admit read it
	cancel      context.CancelFunc

	once     sync.Once
	mu       sync.Mutex
	recorded bool // guarded by mu
}

func (s *stream) RecvMsg(msg any) error {
	err := s.ClientStream.RecvMsg(msg)
	if err != nil {
		if err == io.EOF {
			s.finish(nil)
		} else {
			s.finish(err)
		}
		return err
	}
	s.record(nil)
	return nil
}

// record tells the breaker the stream's outcome, and counts it as an
// attempt, once.
func (s *stream) record(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recorded {
		return
	}
	s.recorded = true
	s.m.settle(s.callerCtx, s.ticket, s.start, err, streamCode)
}

// streamCode is the code a stream's outcome is counted under: its status,
// or, when its context ended (cancelled by the caller, or its timeout), the
// code of that end.
func streamCode(err error) codes.Code {
	if _, isStatus := status.FromError(err); isStatus {
		return status.Code(err)
	}
	return status.FromContextError(err).Code()
}

// finish ends the stream's hold on the runtime: records its outcome if not
// yet done, frees its permit and its context.
func (s *stream) finish(err error) {
	s.once.Do(func() {
		s.record(err)
		s.cancel()
		s.release()
	})
}

func (s *stream) release() {
	if s.holdsPermit {
		s.holdsPermit = false
		s.m.releasePermit()
	}
}
