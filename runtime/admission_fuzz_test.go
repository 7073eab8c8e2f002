package runtime

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
	"github.com/go-resilient/resilient/runtime/policy"
)

// FuzzAdmission drives a client's admission and settlement (the bulkhead,
// the breaker and the metrics' verdict) with unary calls and streams that
// end in every way there is: an answer, a failure, a timeout, a panic, the
// caller cancelling mid-flight or before anything was sent, a message that
// does not marshal, the end of a stream or its first message. The calls
// are fakes on the client's side of gRPC, so the run is deterministic; the
// breaker is checked against the reference model of FuzzBreaker, fed what
// the README says each ending counts as, and the permits against the
// streams held.
func FuzzAdmission(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0, 2, 0, 2, 0, 6, 2, 10, 0, 0, 1, 0, 2, 0, 7, 0, 1})
	f.Add([]byte{0, 1, 1, 0, 2, 0, 2, 0, 2, 3, 40, 1, 0, 1, 0, 2, 0, 0, 5, 0, 4, 0, 0})
	f.Add([]byte{1, 0, 2, 1, 0, 2, 0, 2, 6, 2, 0, 2, 1, 0, 3, 60, 1, 1, 1, 0, 2, 0, 7, 2, 0, 1})
	f.Add([]byte{0, 3, 0, 0, 5, 0, 6, 0, 7, 1, 4, 1, 6, 2, 0, 5, 2, 1, 6, 0, 1})
	f.Add([]byte{1, 1, 1, 1, 1, 8, 1, 8, 1, 0, 2, 7, 0, 2, 0, 1, 1, 0, 2, 2, 0, 1, 8, 2, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		own := prog.Next()%2 == 1 // the stream has a breaker of its own, so its streams probe
		bp := policy.Breaker{FailureRatio: 0.5, MinimumCalls: int(prog.Next()%4) + 1, Window: time.Second,
			CoolDown: 100 * time.Millisecond, HalfOpenProbes: int(prog.Next()%3) + 1,
			FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
		permits := int(prog.Next()%3) + 1
		const get, watch = "/fuzz.Svc/Get", "/fuzz.Svc/Watch"
		sp := policy.Service{Name: "fuzz.Svc", Breaker: &bp, Bulkhead: &policy.Bulkhead{Permits: permits},
			Methods: []policy.Method{{Name: get, Idempotent: true}, {Name: watch, Kind: policy.KindServerStreaming}}}
		if own {
			own := bp
			sp.Methods[1].Breaker = &own
		}
		clock := &fuzzClock{base: time.Unix(1_000_000, 0)}
		c, err := NewClient(&sp, WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		unaryModel, streamModel := newBreakerModel(bp), (*breakerModel)(nil)
		if own {
			streamModel = newBreakerModel(bp)
		} else {
			streamModel = unaryModel
		}
		fcc := &fakeConn{}
		conn := c.Conn(fcc)
		type held struct {
			s        *stream
			fake     *fakeStream
			cancel   context.CancelFunc
			t        ticket
			recorded bool
			sendEOF  bool // its permit went back at SendMsg's io.EOF
		}
		var streams []*held
		permitsHeld := func() int {
			n := 0
			for _, h := range streams {
				if !h.sendEOF {
					n++
				}
			}
			return n
		}
		defer func() {
			for _, h := range streams {
				h.cancel()
			}
			waitPermits(t, c, get, 0)
		}()
		m := c.byName[get]

		for step := 0; !prog.Done() && step < 512; step++ {
			n := clock.n.Load()
			op := prog.Next()
			arg := prog.Next()
			switch op % 4 {
			case 0: // a unary call
				ending := arg % 8
				ctx, cancel := fuzzContext(ending == 6, ending == 7)
				called := false
				call := func(actx context.Context, _ *fuzzMsg, _ ...grpc.CallOption) (*fuzzMsg, error) {
					called = true
					if got := m.bulkhead.taken(); got != permitsHeld()+1 {
						t.Fatalf("step %d: %d permits taken during a call, want %d", step, got, permitsHeld()+1)
					}
					switch ending {
					case 1:
						return nil, status.Error(codes.NotFound, "no")
					case 2:
						return nil, status.Error(codes.Unavailable, "down")
					case 3:
						return nil, status.Error(codes.DeadlineExceeded, "slow")
					case 4:
						cancel()
						return nil, status.Error(codes.Canceled, "gave up")
					case 5:
						panic("call panicked")
					}
					return &fuzzMsg{}, nil
				}
				var err error
				panicked := catch(func() { _, err = Unary(ctx, m, "", &fuzzMsg{}, nil, call, nil) })
				cancel()
				dead := ending == 6 || ending == 7
				switch {
				case dead:
					if called || status.Code(err) != map[bool]codes.Code{true: codes.Canceled, false: codes.DeadlineExceeded}[ending == 6] {
						t.Fatalf("step %d: dead call: called %v, %v", step, called, err)
					}
					continue
				case permitsHeld() >= permits:
					if called || !errors.Is(err, ErrBulkheadFull) {
						t.Fatalf("step %d: full bulkhead: called %v, %v", step, called, err)
					}
					continue
				}
				tk, _, ok := unaryModel.allow(n)
				if !ok {
					if called || !errors.Is(err, ErrCircuitOpen) {
						t.Fatalf("step %d: the model refuses: called %v, %v", step, called, err)
					}
					continue
				}
				if !called || panicked != (ending == 5) {
					t.Fatalf("step %d: admitted: called %v, panicked %v, ending %d", step, called, panicked, ending)
				}
				unaryModel.done(tk, [...]outcome{outcomeSuccess, outcomeSuccess, outcomeFailure, outcomeFailure, outcomeIgnored, outcomeIgnored}[ending], 0, n)

			case 1: // a stream opens and sends its request
				dead := arg >> 1 % 4
				ctx, cancel := fuzzContext(dead == 1, dead == 2)
				fcc.sendErr = nil
				switch {
				case arg&1 == 1:
					fcc.sendErr = status.Error(codes.Internal, "grpc: error while marshaling: string field contains invalid UTF-8")
				case arg>>3&1 == 1:
					fcc.sendErr = io.EOF // the server ended the stream: the status waits for RecvMsg
				}
				fcc.last = nil
				cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, watch)
				if err == nil {
					err = cs.SendMsg(&fuzzMsg{})
				}
				switch {
				case dead == 1 || dead == 2:
					cancel()
					if fcc.last != nil || status.Code(err) != map[bool]codes.Code{true: codes.Canceled, false: codes.DeadlineExceeded}[dead == 1] {
						t.Fatalf("step %d: dead stream: opened %v, %v", step, fcc.last != nil, err)
					}
					continue
				case permitsHeld() >= permits:
					cancel()
					if fcc.last != nil || !errors.Is(err, ErrBulkheadFull) {
						t.Fatalf("step %d: full bulkhead: opened %v, %v", step, fcc.last != nil, err)
					}
					continue
				}
				tk, _, ok := streamModel.allowAs(n, own)
				if !ok {
					cancel()
					if fcc.last != nil || !errors.Is(err, ErrCircuitOpen) {
						t.Fatalf("step %d: the model refuses the stream: opened %v, %v", step, fcc.last != nil, err)
					}
					continue
				}
				if fcc.last == nil {
					t.Fatalf("step %d: admitted stream not opened: %v", step, err)
				}
				if fcc.sendErr == io.EOF {
					if err != io.EOF {
						t.Fatalf("step %d: send: %v, want io.EOF", step, err)
					}
					streams = append(streams, &held{s: cs.(*stream), fake: fcc.last, cancel: cancel, t: tk, sendEOF: true})
					break
				}
				if fcc.sendErr != nil {
					cancel()
					if status.Code(err) != codes.Internal {
						t.Fatalf("step %d: failed send: %v", step, err)
					}
					streamModel.done(tk, outcomeIgnored, 0, n)
					break
				}
				streams = append(streams, &held{s: cs.(*stream), fake: fcc.last, cancel: cancel, t: tk})

			case 2: // a stream held receives, or ends
				if len(streams) == 0 {
					continue
				}
				i := int(prog.Next()) % len(streams)
				h := streams[i]
				ending := arg % 8
				var o outcome
				switch ending {
				case 0:
					h.fake.recvErr = nil
				case 1:
					h.fake.recvErr = io.EOF
				case 2:
					h.fake.recvErr, o = status.Error(codes.Unavailable, "down"), outcomeFailure
				case 3:
					h.fake.recvErr = status.Error(codes.NotFound, "no")
				case 4:
					h.fake.recvErr, o = status.Error(codes.DeadlineExceeded, "slow"), outcomeFailure
				case 5:
					h.fake.recvErr, o = context.DeadlineExceeded, outcomeFailure // a bare context error
				case 6:
					h.fake.panics, o = true, outcomeIgnored
				case 7:
					o = outcomeIgnored
				}
				if ending == 7 {
					h.cancel() // the caller's context ends: its AfterFunc frees the stream
					want := permitsHeld()
					if !h.sendEOF {
						want--
					}
					waitPermits(t, c, get, want)
					waitFor(t, "the cancelled stream recorded", func() bool {
						h.s.mu.Lock()
						defer h.s.mu.Unlock()
						return h.s.recorded
					})
				} else if panicked := catch(func() { _ = h.s.RecvMsg(&fuzzMsg{}) }); panicked != (ending == 6) {
					t.Fatalf("step %d: stream panicked %v, ending %d", step, panicked, ending)
				}
				if !h.recorded {
					streamModel.done(h.t, o, 0, n)
					h.recorded = true
				}
				if ending != 0 {
					h.cancel()
					streams = append(streams[:i], streams[i+1:]...)
				}

			case 3: // time passes
				clock.n.Add(int64(arg) * int64(time.Millisecond))
			}
			n = clock.n.Load()
			now := clock.Now()
			if got, want := c.byName[get].breaker.stateAtTime(now), unaryModel.stateAt(n); got != want {
				t.Fatalf("step %d: unary breaker %v, the model says %v", step, got, want)
			}
			if got, want := c.byName[watch].breaker.stateAtTime(now), streamModel.stateAt(n); got != want {
				t.Fatalf("step %d: stream breaker %v, the model says %v", step, got, want)
			}
			if got := m.bulkhead.taken(); got != permitsHeld() {
				t.Fatalf("step %d: %d permits taken, %d streams hold one", step, got, permitsHeld())
			}
		}
	})
}

type fuzzMsg struct{}

// fuzzClock is the clock of FuzzAdmission: n nanoseconds after base.
type fuzzClock struct {
	base time.Time
	n    atomic.Int64
}

func (c *fuzzClock) Now() time.Time { return c.base.Add(time.Duration(c.n.Load())) }

// fuzzContext is a live context, or one already cancelled or past its
// deadline.
func fuzzContext(cancelled, expired bool) (context.Context, context.CancelFunc) {
	if expired {
		return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	}
	ctx, cancel := context.WithCancel(context.Background())
	if cancelled {
		cancel()
	}
	return ctx, cancel
}

// catch runs f and reports whether it panicked.
func catch(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

func waitPermits(t *testing.T, c *Client, method string, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, _ := c.BulkheadInUse(method)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d permits taken, want %d", n, want)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// fakeConn opens fakeStreams whose first SendMsg fails with sendErr.
type fakeConn struct {
	sendErr error
	last    *fakeStream
}

func (f *fakeConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error { return nil }

func (f *fakeConn) NewStream(ctx context.Context, _ *grpc.StreamDesc, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	f.last = &fakeStream{ctx: ctx, sendErr: f.sendErr}
	return f.last, nil
}

// fakeStream is the client side of a stream whose RecvMsg returns recvErr,
// or panics.
type fakeStream struct {
	grpc.ClientStream
	ctx     context.Context
	sendErr error
	recvErr error
	panics  bool
}

func (s *fakeStream) Context() context.Context { return s.ctx }
func (s *fakeStream) SendMsg(any) error        { return s.sendErr }
func (s *fakeStream) CloseSend() error         { return nil }
func (s *fakeStream) RecvMsg(any) error {
	if s.panics {
		panic("codec panicked")
	}
	return s.recvErr
}
