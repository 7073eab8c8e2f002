package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Attack 27f: the promises of "What it survives" and "Recommended dial
// options" that no test counted.

// slamListener accepts TCP connections and closes each at once, before a
// word of HTTP/2: every connection attempt of a channel fails, and the
// listener counts them.
type slamListener struct {
	lis      net.Listener
	accepted atomic.Int32
	done     chan struct{}
}

func newSlamListener(t *testing.T) *slamListener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slamListener{lis: lis, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		<-s.done
	})
	return s
}

// TestAttack27FDialOptionsKeepGRPCsReconnectionBackoff: "the reconnection
// backoff stays gRPC's standard (1 s, growing to 120 s with jitter)"
// (Recommended dial options; DialOptions' comment: grpc.WithConnectParams
// replaces both, and a zero backoff would reconnect in a tight loop). A
// peer that accepts and closes every connection at once makes each attempt
// fail: in 1.9 s the standard backoff allows the first attempt, a second
// after 0.8–1.2 s, and a third no sooner than 0.8 + 1.28 s; a zero backoff
// would make hundreds.
func TestAttack27FDialOptionsKeepGRPCsReconnectionBackoff(t *testing.T) {
	peer := newSlamListener(t)
	cc := dialFault(t, peer.lis.Addr().String())
	cc.Connect()
	time.Sleep(1900 * time.Millisecond)
	n := peer.accepted.Load()
	cc.Close()
	if n < 2 || n > 3 {
		t.Errorf("a peer closing every connection saw %d connection attempts in 1.9s; want 2 (gRPC's standard backoff: 1s ± 20%%, then 1.6s), not a tight loop nor a longer backoff", n)
	}
}

// TestAttack27FRefusedConnectionCountsItsAttempts: "nothing listening |
// retry, breaker, fallback | UNAVAILABLE within 250 ms, 3 attempts
// included; the breaker ... opens at the fifth attempt, in the second
// call ...; Charge fails after 1 attempt" (What it survives).
// TestFaultRefusedConnectionFailsFastAndOpensTheBreaker checks the code
// of five calls, and ErrCircuitOpen is UNAVAILABLE too: it cannot tell
// when the breaker opened, nor count attempts. Counted here by an
// interceptor on the connection: every attempt that left the runtime.
func TestAttack27FRefusedConnectionCountsItsAttempts(t *testing.T) {
	addr, err := faultserver.Refused()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		attempts[method]++
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	seen := func(method string) int {
		mu.Lock()
		defer mu.Unlock()
		return attempts[method]
	}
	cc := dialFault(t, addr, count)
	c := invClient(t, cc, nil, func(p *policy.Service) {
		getStockPolicy(300*time.Millisecond, 3)(p)
		p.Breaker = breakerPolicy(5, 1)
	})
	plain := inventoryv1.NewInventoryServiceClient(cc)
	// What each of the first six calls got: its attempts, and whether the
	// breaker's refusal ended it.
	type outcome struct {
		attempts int
		open     bool
	}
	var got []outcome
	for i := range 6 {
		before := seen(getStock)
		begin := time.Now()
		_, err := runtime.Unary(context.Background(), c.Runtime().Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		took := time.Since(begin)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i+1, err)
		}
		if took > 250*time.Millisecond {
			t.Errorf("call %d took %v with its attempts; want within 250ms", i+1, took)
		}
		got = append(got, outcome{seen(getStock) - before, errors.Is(err, runtime.ErrCircuitOpen)})
	}
	// minimum_calls counts attempts (Options), and an open breaker ends
	// the retry loop (Order of the layers): the fifth attempt, the second
	// of the second call, opens it, and that call ends ErrCircuitOpen.
	// (Until attack27f the README said "ErrCircuitOpen after 5 calls":
	// the matrix test could not tell, ErrCircuitOpen is UNAVAILABLE too.)
	want := []outcome{{3, false}, {2, true}, {0, true}, {0, true}, {0, true}, {0, true}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("calls to a refused port under minimum_calls 5, 3 attempts a call (attempts, ended by ErrCircuitOpen): %v; "+
				"the README (What it survives, \"nothing listening\") promises the breaker open at the fifth attempt, in the second call: %v", got, want)
			break
		}
	}

	pay, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before := seen(charge)
		if _, err := pay.Charge(context.Background(), &paymentsv1.ChargeRequest{OrderId: "o"}); status.Code(err) != codes.Unavailable {
			t.Fatalf("Charge %d: %v, want UNAVAILABLE", i+1, err)
		}
		if got := seen(charge) - before; got != 1 {
			t.Errorf("Charge %d: %d attempts; want 1 (never retried)", i+1, got)
		}
	}
}

// TestAttack27FResetReserveStockRetriesWithTheSameKey: "connection reset
// mid-call | ReserveStock answered by its retry, same idempotency key"
// (What it survives). The matrix test counts the two calls; here the
// server records the key each carried, and sees the reset one cancelled.
func TestAttack27FResetReserveStockRetriesWithTheSameKey(t *testing.T) {
	srv, cc := startFault(t, nil)
	var mu sync.Mutex
	var keys []string
	reset := faultserver.PerCall(srv.Reset(), server.Healthy)
	srv.SetBehaviour(func(ctx context.Context, c server.Call) error {
		mu.Lock()
		keys = append(keys, c.IdempotencyKey)
		mu.Unlock()
		return reset(ctx, c)
	})
	c := invClient(t, cc, nil, nil)
	if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "o-27f", Sku: "a", Units: 1}); err != nil {
		t.Fatalf("%v, want the retry to answer", err)
	}
	mu.Lock()
	got := append([]string(nil), keys...)
	mu.Unlock()
	if len(got) != 2 || got[0] == "" || got[0] != got[1] {
		t.Errorf("the server saw keys %q; want 2 attempts with one non-empty key", got)
	}
	eventually(t, "server saw the reset call end", func() bool { return srv.Cancelled(reserveStock) == 1 })
}

// TestAttack27FRestartIntoASilentPeerIsBoundedByTheConnectTimeout: "a
// peer that accepts TCP connections and never completes the HTTP/2
// handshake fails calls with UNAVAILABLE in seconds instead of holding
// the ones without a timeout" (Recommended dial options). The matrix test
// dials a silent peer from a fresh channel; here the channel was ready
// on a healthy server, which restarts on the same port into a process
// that accepts and never speaks (bound its port, wedged before serving).
// A call without a timeout then waits for the new connection: the connect
// timeout (3 s) ends it UNAVAILABLE, not the caller's 20 s deadline, and
// the next call fails at once instead of waiting another 3 s.
func TestAttack27FRestartIntoASilentPeerIsBoundedByTheConnectTimeout(t *testing.T) {
	t.Parallel()
	srv, cc := startFault(t, server.Healthy)
	c := invClient(t, cc, nil, getStockPolicy(0, 1))
	if _, err := getStockOf(context.Background(), c); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	srv.Down()
	lis, err := net.Listen("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The channel learns of the old connection's end on its own time: a
	// call still given that connection fails UNAVAILABLE at once. Wait
	// until it has left READY, so that the call waits for a new one.
	for s := cc.GetState(); s == connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatal("the channel is still READY on a server that went down")
		}
	}
	// Each call without a timeout, made one after another on the silent
	// peer: none may wait past the connect timeout (plus a second for the
	// machine). Whether one fails at once or waits for a connection
	// attempt depends on where the channel is in its backoff.
	for i := range 3 {
		took, err := getStockOf(ctx, c)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d after a restart into a silent peer, without a timeout: %v after %v; want UNAVAILABLE by the connect timeout", i+1, err, took)
		}
		within(t, fmt.Sprintf("call %d without a timeout, after a restart into a silent peer", i+1), took, 0, runtime.ConnectTimeout+time.Second)
		t.Logf("call %d: UNAVAILABLE after %v", i+1, took.Round(time.Millisecond))
	}
	mu.Lock()
	n := len(held)
	mu.Unlock()
	if n == 0 {
		t.Error("the silent peer accepted no connection: the call did not wait on it")
	}
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d calls, want the 1 before the restart", got)
	}
}
