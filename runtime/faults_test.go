package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The fault matrix: for each fault of a dependency or of the network between
// it and the caller, and each pattern that applies, what the server saw and
// what the caller got, over real gRPC on loopback. The clients are the
// generated ones, dialled with runtime.DialOptions, their policy edited with
// runtime.WithPolicy where a test needs other numbers than the example's.
// README.md ("What it survives") lists every test here.

// dialFault dials addr with the recommended options, then extra.
func dialFault(t *testing.T, addr string, extra ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts := append(runtime.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	cc, err := grpc.NewClient(addr, append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// startFault serves the example services with b (and the server options
// that accept the recommended keep-alive) and dials them.
func startFault(t *testing.T, b server.Behaviour, extra ...grpc.DialOption) (*faultserver.Server, *grpc.ClientConn) {
	t.Helper()
	return startFaultWith(t, b, nil, extra...)
}

// startFaultWith is startFault with server options added to those.
func startFaultWith(t *testing.T, b server.Behaviour, serve []grpc.ServerOption, extra ...grpc.DialOption) (*faultserver.Server, *grpc.ClientConn) {
	t.Helper()
	srv, err := faultserver.Start(b, append(runtime.ServerOptions(), serve...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv, dialFault(t, srv.Addr(), extra...)
}

// fallbacks counts the calls a fallback answered.
type fallbacks struct{ n atomic.Int32 }

// invClient builds the generated inventory client with the annotated policy
// edited by edit (if not nil), and a GetStock fallback counted in fb (if
// not nil).
func invClient(t *testing.T, cc grpc.ClientConnInterface, fb *fallbacks, edit func(p *policy.Service)) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	// These tests are about the layers every call goes through; GetStock's
	// cache (which would answer most of their repeated calls) and the
	// service's rate limit have tests of their own.
	opts := inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithPolicy(withoutCacheAndRateLimit)}}
	if edit != nil {
		opts.Runtime = append(opts.Runtime, runtime.WithPolicy(edit))
	}
	if fb != nil {
		opts.GetStockFallback = func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			fb.n.Add(1)
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		}
	}
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withoutCacheAndRateLimit removes the cache and the rate limits from the
// annotated inventory policy.
func withoutCacheAndRateLimit(p *policy.Service) {
	p.RateLimit = nil
	for i := range p.Methods {
		p.Methods[i].Cache, p.Methods[i].RateLimit = nil, nil
	}
}

func getStockOf(ctx context.Context, c *inventoryv1.InventoryServiceResilientClient) (time.Duration, error) {
	begin := time.Now()
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	return time.Since(begin), err
}

// noBreaker removes the breaker and sets GetStock's timeout and retries.
func getStockPolicy(timeout time.Duration, attempts int) func(p *policy.Service) {
	return func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
		m := &p.Methods[0]
		m.Timeout = timeout
		if attempts <= 1 {
			m.Retry = nil
		} else {
			m.Retry = retryPolicy(attempts)
		}
	}
}

// within fails the test when took is outside [lo, hi].
func within(t *testing.T, what string, took, lo, hi time.Duration) {
	t.Helper()
	if took < lo || took > hi {
		t.Errorf("%s took %v, want within [%v, %v]", what, took, lo, hi)
	}
}

// --- a slow dependency -----------------------------------------------------

// TestFaultSlowWithinTimeoutAnswers: a server 50 ms slow under a 1 s
// timeout answers, once, when it answers: the call takes the 50 ms and
// no more than twice what the scheduler alone made a bare wait for them
// late, plus 150 ms. The connection is made beforehand and the timeout
// leaves 950 ms, so that a loaded machine neither spends the call's time
// dialling nor stretches the 50 ms past the timeout (a fixed 250 ms bound
// under a 300 ms timeout was exceeded at load 8).
func TestFaultSlowWithinTimeoutAnswers(t *testing.T) {
	const slow = 50 * time.Millisecond
	srv, cc := startFault(t, server.Slow(slow))
	readyConn(t, cc)
	c := invClient(t, cc, nil, getStockPolicy(time.Second, 3))
	late := bareWait(slow)
	took, err := getStockOf(context.Background(), c)
	if err != nil {
		t.Fatalf("err = %v, want an answer", err)
	}
	bare := late()
	within(t, fmt.Sprintf("a 50ms call under a 1s timeout (a bare wait of 50ms woke %v late)", bare), took, slow, slow+2*bare+150*time.Millisecond)
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d calls, want 1", got)
	}
}

// TestFaultSlowBeyondTimeoutIsCutAndNotRetried: a 2 s call under a
// 300 ms timeout is cut at the timeout (within twice what a bare wait for
// it woke late, plus 150 ms) and not retried. The connection is made
// beforehand and the timeout leaves the request 300 ms to reach the
// server, which must see it cancelled (100 ms, with a fixed 250 ms bound,
// is what the hung-server test failed by at load 8).
func TestFaultSlowBeyondTimeoutIsCutAndNotRetried(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv, cc := startFault(t, server.Slow(2*time.Second))
	readyConn(t, cc)
	c := invClient(t, cc, nil, getStockPolicy(timeout, 3))
	late := bareWait(timeout)
	took, err := getStockOf(context.Background(), c)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("code = %v (%v), want DEADLINE_EXCEEDED", status.Code(err), err)
	}
	bare := late()
	within(t, fmt.Sprintf("a 2s call under a 300ms timeout (a bare wait for it woke %v late)", bare), took, timeout, timeout+2*bare+150*time.Millisecond)
	eventually(t, "server saw the call cancelled", func() bool { return srv.Cancelled(getStock) == 1 })
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d calls, want 1: DEADLINE_EXCEEDED is not retried by default", got)
	}
}

func TestFaultSlowFillsTheBulkheadWhichRefusesTheRest(t *testing.T) {
	srv, cc := startFault(t, server.Slow(300*time.Millisecond))
	c := invClient(t, cc, nil, func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = &policy.Bulkhead{Permits: 4, MaxWait: 20 * time.Millisecond}
		p.Methods[0].Timeout = time.Second
	})
	var wg sync.WaitGroup
	var ok, full atomic.Int32
	var slowest atomic.Int64
	for range 20 {
		wg.Go(func() {
			took, err := getStockOf(context.Background(), c)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, runtime.ErrBulkheadFull) && status.Code(err) == codes.ResourceExhausted:
				full.Add(1)
				for {
					s := slowest.Load()
					if int64(took) <= s || slowest.CompareAndSwap(s, int64(took)) {
						break
					}
				}
			default:
				t.Errorf("unexpected error %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 4 || full.Load() != 16 {
		t.Errorf("%d answered, %d refused; want 4 (the permits) and 16", ok.Load(), full.Load())
	}
	if got := srv.MaxInFlight(); got > 4 {
		t.Errorf("server had %d calls in flight at once, want at most the 4 permits", got)
	}
	if d := time.Duration(slowest.Load()); d > 150*time.Millisecond {
		t.Errorf("the slowest refusal took %v, want the 20ms max wait (plus a margin)", d)
	}
}

// --- a hung dependency -----------------------------------------------------

// TestFaultHangTimesOutThenOpensTheBreaker: five calls to a hung server
// each end at their 150 ms timeout (within twice what a bare wait for it
// woke late, plus 150 ms), the server sees all five cancelled, and the
// breaker opens: the next calls are refused without reaching it, and a
// probe after the cool-down (a fake clock) hangs too and opens it again.
// The connection is made beforehand, and each request has 150 ms to
// reach the server before it is cut (50 ms was the slack, on a loaded
// machine, of a request the server must see).
func TestFaultHangTimesOutThenOpensTheBreaker(t *testing.T) {
	const timeout = 150 * time.Millisecond
	srv, cc := startFault(t, server.Hang)
	readyConn(t, cc)
	clock := newFakeClock()
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
		runtime.WithClock(clock), runtime.WithPolicy(func(p *policy.Service) {
			withoutCacheAndRateLimit(p)
			getStockPolicy(timeout, 3)(p)
			p.Breaker = breakerPolicy(5, 1)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		late := bareWait(timeout)
		took, err := getStockOf(context.Background(), c)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call %d: %v, want DEADLINE_EXCEEDED", i, err)
		}
		bare := late()
		within(t, fmt.Sprintf("call %d (a bare wait for its timeout woke %v late)", i, bare), took, timeout, timeout+2*bare+150*time.Millisecond)
	}
	for range 10 {
		took, err := getStockOf(context.Background(), c)
		if !errors.Is(err, runtime.ErrCircuitOpen) || status.Code(err) != codes.Unavailable {
			t.Fatalf("after 5 timeouts: %v, want ErrCircuitOpen (UNAVAILABLE)", err)
		}
		within(t, "a refusal by the open breaker", took, 0, 50*time.Millisecond)
	}
	if got := srv.Calls(getStock); got != 5 {
		t.Errorf("server saw %d calls, want 5: nothing passes the open breaker", got)
	}
	eventually(t, "server saw the 5 calls cancelled", func() bool { return srv.Cancelled(getStock) == 5 })

	// After the cool-down one probe goes; it hangs too and the breaker opens again.
	clock.Advance(10 * time.Second)
	if _, err := getStockOf(context.Background(), c); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("probe: %v, want DEADLINE_EXCEEDED", err)
	}
	if s, _ := c.Runtime().BreakerState(getStock); s != runtime.StateOpen {
		t.Errorf("breaker %v after a probe timed out, want open", s)
	}
}

// TestFaultHangEndsTheStreamAtItsTimeoutAndFreesThePermit: a stream to a
// hung server ends DEADLINE_EXCEEDED at its 300 ms timeout (within twice
// what a bare wait for it woke late, plus 150 ms), its permit given back,
// and the server sees it cancelled. The connection is made beforehand
// and the timeout leaves the stream 300 ms to reach the server (100 ms
// with a fixed 250 ms bound is what load 8 broke in the unary tests).
func TestFaultHangEndsTheStreamAtItsTimeoutAndFreesThePermit(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv, cc := startFault(t, server.Hang)
	readyConn(t, cc)
	c := invClient(t, cc, nil, func(p *policy.Service) { p.Methods[2].Timeout = timeout })
	begin := time.Now()
	late := bareWait(timeout)
	st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("recv: %v, want DEADLINE_EXCEEDED", err)
	}
	took := time.Since(begin)
	bare := late()
	within(t, fmt.Sprintf("a hung stream under a 300ms timeout (a bare wait for it woke %v late)", bare), took, timeout, timeout+2*bare+150*time.Millisecond)
	if n, _ := c.Runtime().BulkheadInUse(watchStock); n != 0 {
		t.Errorf("%d permits still taken after the stream ended", n)
	}
	eventually(t, "server saw the stream cancelled", func() bool { return srv.Cancelled(watchStock) == 1 })
}

// --- any status ------------------------------------------------------------

// TestFaultEveryStatusCode returns each non-OK code from the server and
// checks, against the example's policy (retryable: UNAVAILABLE; breaker
// failures: UNAVAILABLE, DEADLINE_EXCEEDED), how many attempts were made,
// what the caller got, whether the breaker counted a failure and whether
// the fallback answered.
func TestFaultEveryStatusCode(t *testing.T) {
	srv, cc := startFault(t, nil)
	answers := policy.CodesOf(codes.Canceled, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.FailedPrecondition, codes.Aborted, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated)
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		t.Run(codename.Of(code), func(t *testing.T) {
			srv.SetBehaviour(server.Fail(code))
			before := srv.Calls(getStock)
			var fb fallbacks
			c := invClient(t, cc, &fb, func(p *policy.Service) {
				getStockPolicy(time.Second, 3)(p)
				p.Breaker = breakerPolicy(1, 1) // opens on the first failure
			})
			// Without the fallback, through the runtime directly, to see the code.
			plain := inventoryv1.NewInventoryServiceClient(cc)
			_, err := runtime.Unary(context.Background(), c.Runtime().Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
			if status.Code(err) != code {
				t.Fatalf("caller got %v (%v), want %v", status.Code(err), err, code)
			}
			wantAttempts := 1
			if code == codes.Unavailable {
				wantAttempts = 3
			}
			failure := policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded).Has(code)
			if failure {
				wantAttempts = 1 // the breaker opened on the first failure and ended the loop
			}
			if got := srv.Calls(getStock) - before; got != wantAttempts {
				t.Errorf("server saw %d attempts, want %d", got, wantAttempts)
			}
			state, _ := c.Runtime().BreakerState(getStock)
			if (state == runtime.StateOpen) != failure {
				t.Errorf("breaker %v: a failure of the dependency = %v", state, failure)
			}
			// With the fallback, through the generated client.
			resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"})
			if answers.Has(code) {
				if fb.n.Load() != 0 || status.Code(err) != code {
					t.Errorf("an answer reached the fallback (%d) or was changed: %v", fb.n.Load(), err)
				}
			} else if fb.n.Load() != 1 || err != nil || resp.GetUnits() != -1 {
				t.Errorf("fallback answered %d times, err %v: want it to answer the failure", fb.n.Load(), err)
			}
		})
	}

	// The same without a breaker: UNAVAILABLE is retried up to max_attempts.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	before := srv.Calls(getStock)
	c := invClient(t, cc, nil, getStockPolicy(time.Second, 3))
	if _, err := getStockOf(context.Background(), c); status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want UNAVAILABLE", err)
	}
	if got := srv.Calls(getStock) - before; got != 3 {
		t.Errorf("server saw %d attempts of UNAVAILABLE, want 3", got)
	}
}

// --- nothing listening -----------------------------------------------------

func TestFaultRefusedConnectionFailsFastAndOpensTheBreaker(t *testing.T) {
	addr, err := faultserver.Refused()
	if err != nil {
		t.Fatal(err)
	}
	cc := dialFault(t, addr)
	var fb fallbacks
	c := invClient(t, cc, &fb, func(p *policy.Service) {
		getStockPolicy(300*time.Millisecond, 3)(p)
		p.Breaker = breakerPolicy(5, 1)
	})
	plain := inventoryv1.NewInventoryServiceClient(cc)
	for i := range 5 {
		begin := time.Now()
		_, err := runtime.Unary(context.Background(), c.Runtime().Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i, err)
		}
		// Retries fail at once too: the channel stays in TRANSIENT_FAILURE
		// for its reconnection backoff. The backoffs are under 20ms.
		within(t, fmt.Sprintf("call %d", i), time.Since(begin), 0, 250*time.Millisecond)
	}
	_, err = runtime.Unary(context.Background(), c.Runtime().Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
	if !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("after 5 refused calls: %v, want ErrCircuitOpen", err)
	}
	if resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil || resp.GetUnits() != -1 || fb.n.Load() != 1 {
		t.Errorf("with a fallback: %v, %v; want the fallback's answer", resp, err)
	}

	// A method that is not idempotent fails the same way, once.
	pay, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := pay.Charge(context.Background(), &paymentsv1.ChargeRequest{OrderId: "o"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Charge: %v, want UNAVAILABLE", err)
	}
	within(t, "Charge", time.Since(begin), 0, 250*time.Millisecond)
}

// --- a peer that accepts and never speaks HTTP/2 ------------------------------

func TestFaultSilentPeerIsBoundedByTheTimeoutAndTheConnectTimeout(t *testing.T) {
	t.Parallel()
	silent, err := faultserver.ListenSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cc := dialFault(t, silent.Addr())

	// With a per-attempt timeout the call ends at it.
	c := invClient(t, cc, nil, getStockPolicy(200*time.Millisecond, 3))
	took, err := getStockOf(context.Background(), c)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("with a 200ms timeout: %v, want DEADLINE_EXCEEDED", err)
	}
	within(t, "the call with a 200ms timeout", took, 200*time.Millisecond, 400*time.Millisecond)

	// Without one, the connect timeout of DialOptions (3s) ends the
	// connection attempt and the call fails UNAVAILABLE, long before the
	// caller's 20s deadline (grpc-go's own connect timeout is 20s).
	c = invClient(t, cc, nil, getStockPolicy(0, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	took, err = getStockOf(ctx, c)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("without a timeout: %v, want UNAVAILABLE once the connect timeout expired", err)
	}
	within(t, "the call without a timeout", took, 0, runtime.ConnectTimeout+time.Second)
	if silent.Accepted() == 0 {
		t.Error("the silent peer accepted no connection")
	}
}

// --- a connection reset mid-call -------------------------------------------

func TestFaultResetMidCallRetriesOnlyWhatMayBeRepeated(t *testing.T) {
	srv, cc := startFault(t, nil)
	reset := faultserver.PerCall(srv.Reset(), server.Healthy)

	t.Run("idempotent GetStock is retried and answers", func(t *testing.T) {
		srv.SetBehaviour(reset)
		c := invClient(t, cc, nil, getStockPolicy(time.Second, 3))
		took, err := getStockOf(context.Background(), c)
		if err != nil {
			t.Fatalf("%v, want the retry over a new connection to answer", err)
		}
		within(t, "the call", took, 0, 500*time.Millisecond)
		if got := srv.Calls(getStock); got != 2 {
			t.Errorf("server saw %d calls, want 2", got)
		}
		eventually(t, "server saw the reset call end", func() bool { return srv.Cancelled(getStock) == 1 })
	})
	t.Run("keyed ReserveStock is retried with the same key", func(t *testing.T) {
		srv.SetBehaviour(reset)
		c := invClient(t, cc, nil, nil)
		if _, err := c.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1}); err != nil {
			t.Fatalf("%v, want the retry to answer", err)
		}
		if got := srv.Calls(reserveStock); got != 2 {
			t.Errorf("server saw %d calls, want 2", got)
		}
	})
	t.Run("Charge is not repeated", func(t *testing.T) {
		srv.SetBehaviour(reset)
		pay, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pay.Charge(context.Background(), &paymentsv1.ChargeRequest{OrderId: "o"}); status.Code(err) != codes.Unavailable {
			t.Fatalf("%v, want UNAVAILABLE", err)
		}
		if got := srv.Calls(charge); got != 1 {
			t.Errorf("server saw %d charges, want exactly 1", got)
		}
	})
	t.Run("a stream ends UNAVAILABLE and frees its permit", func(t *testing.T) {
		srv.SetBehaviour(reset)
		c := invClient(t, cc, nil, nil)
		st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("recv: %v, want UNAVAILABLE", err)
		}
		if n, _ := c.Runtime().BulkheadInUse(watchStock); n != 0 {
			t.Errorf("%d permits still taken", n)
		}
		if got := srv.Calls(watchStock); got != 1 {
			t.Errorf("server saw %d streams, want 1: streams are never retried", got)
		}
	})
}

// --- a restart on the same port ------------------------------------------

func TestFaultRestartDuringARun(t *testing.T) {
	t.Parallel()
	srv, cc := startFault(t, server.Slow(5*time.Millisecond))
	var fb fallbacks
	c := invClient(t, cc, &fb, nil) // the annotated policy, breaker and all
	// The longest a GetStock call may take under it: 20ms for a permit, three
	// attempts of 300ms, backoffs under 50ms and 100ms.
	const bound = 20*time.Millisecond + 3*300*time.Millisecond + 150*time.Millisecond

	type result struct {
		at, took time.Duration
		answered bool // by the dependency, not the fallback
		err      error
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	start := time.Now()
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				at := time.Since(start)
				resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"})
				mu.Lock()
				results = append(results, result{at, time.Since(start) - at, err == nil && resp.GetUnits() == 42, err})
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	srv.Down()
	downAt := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	upAt := time.Since(start)
	calls := srv.Calls(getStock)
	// Wait for the calls to reach the new incarnation, then a few more.
	deadline := time.Now().Add(6 * time.Second)
	for srv.Calls(getStock) < calls+20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	if srv.Calls(getStock) <= calls {
		t.Fatal("the restarted server received no call within 6s")
	}
	var longest time.Duration
	recovered := time.Duration(-1)
	for _, r := range results {
		longest = max(longest, r.took)
		if r.err != nil {
			t.Errorf("call at %v: %v; the fallback should answer every failure", r.at, r.err)
		}
		if r.answered && r.at > upAt && recovered < 0 {
			recovered = r.at + r.took - upAt
		}
	}
	if longest > bound+200*time.Millisecond {
		t.Errorf("the longest call took %v, more than the policy's bound %v", longest, bound)
	}
	if fb.n.Load() == 0 {
		t.Error("no call failed while the server was down")
	}
	// Recovery waits for the channel's reconnection backoff (1s ± 20%) and,
	// if the breaker opened, its 2s cool-down.
	if recovered < 0 || recovered > 4*time.Second {
		t.Errorf("the dependency answered again %v after it came back, want within 4s", recovered)
	}
	t.Logf("down at %v for 300ms; %d calls, %d answered by the fallback, longest %v; answered again %v after Up",
		downAt.Round(time.Millisecond), len(results), fb.n.Load(), longest.Round(time.Millisecond), recovered.Round(time.Millisecond))
}

// --- server pushback ---------------------------------------------------------

// TestFaultPushback: the server answers UNAVAILABLE with
// grpc-retry-pushback-ms: 300. The trailer reaches the caller, and the
// retry waits the 300 ms the server asked for instead of the policy's few
// milliseconds of backoff. The gap between the two arrivals is bounded by
// the 300 ms, a round trip, twice what a bare 300 ms wait started at the
// first arrival woke late, and 150 ms (a fixed 250 ms for the scheduler
// was exceeded at load 10).
func TestFaultPushback(t *testing.T) {
	const asked = 300 * time.Millisecond
	var mu sync.Mutex
	var arrivals []time.Time
	var late func() time.Duration
	pushback := faultserver.Pushback(codes.Unavailable, asked)
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		if len(arrivals) == 1 {
			late = bareWait(asked)
		}
		mu.Unlock()
		return pushback(ctx, c)
	})
	c := invClient(t, cc, nil, getStockPolicy(time.Second, 2)) // backoff under 5ms
	plain := inventoryv1.NewInventoryServiceClient(cc)
	// The baseline: the longest of a few round trips of the same refusal,
	// without the runtime, to a server of its own; the gap between the
	// attempts holds one besides the pushback.
	_, baseCC := startFault(t, pushback)
	var rtt time.Duration
	for range 3 {
		begin := time.Now()
		if _, err := inventoryv1.NewInventoryServiceClient(baseCC).GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); status.Code(err) != codes.Unavailable {
			t.Fatalf("baseline: %v, want UNAVAILABLE", err)
		}
		rtt = max(rtt, time.Since(begin))
	}
	var trailer metadata.MD
	begin := time.Now()
	_, err := runtime.Unary(context.Background(), c.Runtime().Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"},
		[]grpc.CallOption{grpc.Trailer(&trailer)}, plain.GetStock, nil)
	took := time.Since(begin)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want UNAVAILABLE", err)
	}
	if got := trailer.Get(faultserver.PushbackHeader); len(got) != 1 || got[0] != "300" {
		t.Errorf("the caller saw trailer %q, want the server's 300", got)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}
	mu.Lock()
	gap := arrivals[1].Sub(arrivals[0])
	bare := late()
	mu.Unlock()
	t.Logf("retried %v after a pushback of 300ms; the call took %v; a round trip %v; a bare wait woke %v late", gap.Round(time.Millisecond), took.Round(time.Millisecond), rtt.Round(time.Millisecond), bare.Round(time.Millisecond))
	// At least the 300ms asked for (10ms for the clocks of the two sides);
	// at most that, a round trip, and what the scheduler alone made a bare
	// wait late (twice, for the timer and the goroutines after it) plus
	// 150ms.
	if gap < asked-10*time.Millisecond || gap > asked+rtt+2*bare+150*time.Millisecond {
		t.Errorf("retried %v after the server asked for 300ms (a round trip: %v, a bare wait woke %v late)", gap.Round(time.Millisecond), rtt, bare)
	}
}

// TestFaultNegativePushback: grpc-retry-pushback-ms: -1 means "do not
// retry"; one attempt reaches the server although the policy allows two.
func TestFaultNegativePushback(t *testing.T) {
	srv, cc := startFault(t, faultserver.Pushback(codes.Unavailable, -time.Millisecond))
	c := invClient(t, cc, nil, getStockPolicy(time.Second, 2))
	_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want UNAVAILABLE", err)
	}
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d attempts after answering pushback -1, want 1", got)
	}
}

// --- a peer that vanished ----------------------------------------------------

// TestFaultVanishedPeerIsNoticedByKeepalive freezes the connection while a
// call without a timeout is in flight, as when the server's host vanished:
// no FIN, no RST, nothing. The keep-alive pings of the connection go
// unanswered, the connection is closed and the call fails UNAVAILABLE;
// then the channel reconnects. The pings here are every 10s (grpc-go's
// minimum), with a 2s timeout, to keep the test short; DialOptions' 20s+5s
// behave the same, later.
func TestFaultVanishedPeerIsNoticedByKeepalive(t *testing.T) {
	t.Parallel()
	srv, cc := startFault(t, server.Hang,
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second}))
	c := invClient(t, cc, nil, getStockPolicy(0, 1))
	done := make(chan error, 1)
	var took time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		d, err := getStockOf(ctx, c)
		took = d
		done <- err
	}()
	eventually(t, "the call reached the server", func() bool { return srv.Calls(getStock) == 1 })
	if n := srv.Freeze(); n != 1 {
		t.Fatalf("froze %d connections, want 1", n)
	}
	srv.SetBehaviour(server.Healthy)
	err := <-done
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want UNAVAILABLE from the keep-alive", err)
	}
	within(t, "the call on the vanished connection", took, 10*time.Second, 15*time.Second)
	if _, err := getStockOf(context.Background(), c); err != nil {
		t.Errorf("the next call, on a new connection: %v", err)
	}
}
