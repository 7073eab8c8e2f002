// Package faultserver serves the example services on loopback with every
// fault a resilient client has to survive, for the tests: the faults of a
// service (slow, hung, any status, server pushback; per call or per phase,
// through example/server's Behaviour) and the faults of the network (a port
// where nothing listens, a peer that accepts connections and never speaks
// HTTP/2, a connection reset in the middle of a call, a connection that goes
// silent as if the peer had vanished, a server that restarts on the same
// port). It counts what the server saw across restarts.
package faultserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
)

// Server serves the example InventoryService and PaymentsService on a
// fixed loopback port that survives Down and Up, and can break its own
// connections. Its counters add up every incarnation.
type Server struct {
	addr      string
	opts      []grpc.ServerOption
	behaviour atomic.Pointer[server.Behaviour]

	mu       sync.Mutex
	cur      *server.Server   // nil while down
	past     []*server.Server // stopped incarnations, for their counts
	stopped  bool             // Stop was called: no Up after it
	conns    map[*conn]struct{}
	accepted int
}

// Start serves with behaviour b on a free loopback port. opts are passed to
// the gRPC server of every incarnation.
func Start(b server.Behaviour, opts ...grpc.ServerOption) (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultserver: listen: %w", err)
	}
	s := &Server{addr: lis.Addr().String(), opts: opts, conns: map[*conn]struct{}{}}
	s.SetBehaviour(b)
	if err := s.serve(lis); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the address the server listens on, the same after a restart.
func (s *Server) Addr() string { return s.addr }

// SetBehaviour replaces the behaviour for the calls that arrive from now on:
// a phase of a run.
func (s *Server) SetBehaviour(b server.Behaviour) {
	if b == nil {
		b = server.Healthy
	}
	s.behaviour.Store(&b)
}

// errStopped is Up's error after Stop: a restart still running when its
// test stopped the server must not bring it up again, left serving past
// the test.
var errStopped = errors.New("faultserver: the server was stopped for good (Stop), and does not come up again")

func (s *Server) serve(lis net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		_ = lis.Close()
		return errStopped
	}
	past := s.past
	// Call.N counts across incarnations, so that PerCall holds over a restart.
	b := func(ctx context.Context, c server.Call) error {
		for _, p := range past {
			c.N += p.Calls(c.Method)
		}
		return (*s.behaviour.Load())(ctx, c)
	}
	s.cur = server.Serve(&listener{Listener: lis, s: s}, b, s.opts...)
	return nil
}

// Down stops serving: the calls in flight end, every connection is closed
// and the port is freed, so that connecting is refused until Up.
func (s *Server) Down() {
	s.mu.Lock()
	cur := s.cur
	s.cur = nil
	if cur != nil {
		s.past = append(s.past, cur)
	}
	s.mu.Unlock()
	if cur != nil {
		cur.Stop()
	}
}

// Up listens again on the same port and serves. The port is bound with
// SO_REUSEADDR (Go's default), so it is free again at once. After Stop it
// fails.
func (s *Server) Up() error {
	s.mu.Lock()
	up, stopped := s.cur != nil, s.stopped
	s.mu.Unlock()
	if stopped {
		return errStopped
	}
	if up {
		return nil
	}
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("faultserver: listen again on %s: %w", s.addr, err)
	}
	return s.serve(lis)
}

// Restart goes Down, stays down for d, and comes Up on the same port.
func (s *Server) Restart(d time.Duration) error {
	s.Down()
	time.Sleep(d)
	return s.Up()
}

// Stop stops the server for good: an Up after it (a Restart still
// running) fails rather than serve again.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.Down()
}

// Calls returns how many calls to method (a full method name) arrived, over
// every incarnation.
func (s *Server) Calls(method string) int {
	return s.sum(func(p *server.Server) int { return p.Calls(method) })
}

// Cancelled returns how many calls to method ended because the caller gave
// up or the connection broke while the server was still working on them.
func (s *Server) Cancelled(method string) int {
	return s.sum(func(p *server.Server) int { return p.Cancelled(method) })
}

// MaxInFlight returns the largest number of calls one incarnation handled
// at once.
func (s *Server) MaxInFlight() int {
	m := 0
	s.each(func(p *server.Server) { m = max(m, p.MaxInFlight()) })
	return m
}

// InFlight returns how many calls the server is handling now, over every
// incarnation.
func (s *Server) InFlight() int {
	n := 0
	s.each(func(p *server.Server) { n += p.InFlight() })
	return n
}

// Accepted returns how many TCP connections the server accepted, over every
// incarnation.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

func (s *Server) each(f func(*server.Server)) {
	s.mu.Lock()
	all := append([]*server.Server(nil), s.past...)
	if s.cur != nil {
		all = append(all, s.cur)
	}
	s.mu.Unlock()
	for _, p := range all {
		f(p)
	}
}

func (s *Server) sum(f func(*server.Server) int) int {
	n := 0
	s.each(func(p *server.Server) { n += f(p) })
	return n
}

func (s *Server) open() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

// ResetConnections resets every open connection (a TCP RST, as when the
// peer's process dies or a middlebox drops the flow) and returns how many
// it reset. The server keeps listening: the client may connect again.
func (s *Server) ResetConnections() int {
	cs := s.open()
	for _, c := range cs {
		c.reset()
	}
	return len(cs)
}

// Freeze makes every open connection go silent without closing: nothing
// more is read from it or written to it, as when the peer's host vanished
// or the network between them was cut. Only the client's keep-alive (or the
// calls' own deadlines) can tell. New connections are served normally.
func (s *Server) Freeze() int {
	cs := s.open()
	for _, c := range cs {
		c.frozen.Store(true)
	}
	return len(cs)
}

// Reset returns a Behaviour that resets every open connection of s when a
// call arrives, while the call is in flight, and then waits for the call to
// end: the caller sees the connection break mid-call.
func (s *Server) Reset() server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		s.ResetConnections()
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
}

// PerCall returns a Behaviour that treats the Nth call to a method with
// bs[N-1], and every call after the last with the last one: "fail twice,
// then answer" is PerCall(Fail(codes.Unavailable), Fail(codes.Unavailable),
// Healthy).
func PerCall(bs ...server.Behaviour) server.Behaviour {
	if len(bs) == 0 {
		return server.Healthy
	}
	return func(ctx context.Context, c server.Call) error {
		i := min(max(c.N, 1), len(bs)) - 1
		return bs[i](ctx, c)
	}
}

// PushbackHeader is the trailer by which a gRPC server tells its clients
// how long to wait before retrying, in milliseconds (gRFC A6); a negative
// value asks them not to retry.
const PushbackHeader = "grpc-retry-pushback-ms"

// Pushback returns a Behaviour that answers every call with code and the
// trailer grpc-retry-pushback-ms set to d (in whole milliseconds).
func Pushback(code codes.Code, d time.Duration) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		ms := strconv.FormatInt(d.Milliseconds(), 10)
		if err := grpc.SetTrailer(ctx, metadata.Pairs(PushbackHeader, ms)); err != nil {
			return err
		}
		return status.Errorf(code, "injected %v, retry after %sms", code, ms)
	}
}

// listener tracks the connections it accepts.
type listener struct {
	net.Listener
	s *Server
}

func (l *listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, s: l.s, closed: make(chan struct{})}
	l.s.mu.Lock()
	l.s.conns[c] = struct{}{}
	l.s.accepted++
	l.s.mu.Unlock()
	return c, nil
}

// conn is a server-side connection that can be reset or frozen.
type conn struct {
	net.Conn
	s         *Server
	frozen    atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *conn) Read(p []byte) (int, error) {
	for {
		if c.frozen.Load() {
			<-c.closed
			return 0, net.ErrClosed
		}
		n, err := c.Conn.Read(p)
		if c.frozen.Load() && err == nil {
			continue // arrived after the freeze: dropped
		}
		return n, err
	}
}

func (c *conn) Write(p []byte) (int, error) {
	if c.frozen.Load() {
		return len(p), nil // swallowed
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.closed)
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// reset closes the connection with a TCP RST rather than a FIN.
func (c *conn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// Refused returns a loopback address where nothing listens: connecting to
// it is refused at once.
func Refused() (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("faultserver: listen: %w", err)
	}
	addr := lis.Addr().String()
	return addr, lis.Close()
}

// Silent is a TCP server that accepts connections and never says a word:
// no HTTP/2 preface, no settings, nothing. It is a process that is up but
// wedged, or a port held by something that is not a gRPC server.
type Silent struct {
	lis      net.Listener
	done     chan struct{}
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

// ListenSilent starts a Silent server on a free loopback port.
func ListenSilent() (*Silent, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultserver: listen: %w", err)
	}
	s := &Silent{lis: lis, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.accepted++
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Addr is the address the silent server listens on.
func (s *Silent) Addr() string { return s.lis.Addr().String() }

// Accepted returns how many connections it accepted.
func (s *Silent) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Close stops listening and closes every connection it accepted.
func (s *Silent) Close() error {
	err := s.lis.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
