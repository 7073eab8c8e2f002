package runtime_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// These tests run the runtime against a real gRPC server on loopback that
// misbehaves on purpose, and check what the server saw as well as what the
// caller got.

const (
	getStock     = inventoryv1.InventoryService_GetStock_FullMethodName
	reserveStock = inventoryv1.InventoryService_ReserveStock_FullMethodName
	watchStock   = inventoryv1.InventoryService_WatchStock_FullMethodName
	charge       = paymentsv1.PaymentsService_Charge_FullMethodName
)

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// start serves the example services with behaviour b and dials them.
func start(t *testing.T, b server.Behaviour) (*server.Server, *grpc.ClientConn) {
	t.Helper()
	srv, err := server.Start("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
	})
	return srv, cc
}

// readyConn connects cc and waits, up to 10s, until it is ready: a test
// that times a call starts it on a connection made, so that a loaded
// machine's slow dial does not use up the call's time before the request
// is sent.
func readyConn(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("the connection to %s is %v after 10s", cc.Target(), s)
		}
	}
}

// inventory builds a runtime client for the inventory service with the
// given shared breaker and bulkhead and GetStock/ReserveStock policies.
func inventory(t *testing.T, svc policy.Service, opts ...runtime.Option) *runtime.Client {
	t.Helper()
	svc.Name = "example.inventory.v1.InventoryService"
	if svc.Methods == nil {
		svc.Methods = []policy.Method{{Name: getStock, Idempotent: true}}
	}
	c, err := runtime.NewClient(&svc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func callGetStock(ctx context.Context, rt *runtime.Client, cc grpc.ClientConnInterface) (*inventoryv1.GetStockResponse, error) {
	plain := inventoryv1.NewInventoryServiceClient(cc)
	return runtime.Unary(ctx, rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "apple"}, nil, plain.GetStock, nil)
}

func retryPolicy(attempts int) *policy.Retry {
	return &policy.Retry{MaxAttempts: attempts, InitialBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
}

func breakerPolicy(minCalls, probes int) *policy.Breaker {
	return &policy.Breaker{FailureRatio: 0.5, MinimumCalls: minCalls, Window: 10 * time.Second,
		CoolDown: 10 * time.Second, HalfOpenProbes: probes, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
}

// eventually polls cond for up to a second: the server learns of a
// cancellation a little after the client gave up.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 1s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bareWait starts, beside a call under test, a goroutine that waits for a
// deadline d from now with nothing else to do; late returns how late past
// it that goroutine woke. It is the baseline of a timing bound: what the
// scheduler alone adds, at that moment, on a machine that may be loaded
// (two cores, the race detector, other packages' tests beside).
func bareWait(d time.Duration) (late func() time.Duration) {
	ch := make(chan time.Duration, 1)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		defer cancel()
		dl, _ := ctx.Deadline()
		<-ctx.Done()
		ch <- max(time.Since(dl), 0)
	}()
	return func() time.Duration { return <-ch }
}

// TestHungServerTimesOutWithinAttemptTimeout: a call to a server that
// never answers ends DEADLINE_EXCEEDED at its attempt timeout, and the
// server sees it cancelled. The timeout is 300 ms, on a connection made
// beforehand, so that on a loaded machine the request reaches the hung
// handler before it is cut; the call's end is bounded by the timeout plus
// twice what the scheduler alone made a bare wait for it late, plus
// 150 ms (a fixed 250 ms for a 100 ms timeout was exceeded at load 8).
func TestHungServerTimesOutWithinAttemptTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv, cc := start(t, server.Hang)
	readyConn(t, cc)
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: timeout},
	}})
	begin := time.Now()
	late := bareWait(timeout)
	_, err := callGetStock(context.Background(), rt, cc)
	took := time.Since(begin)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("code = %v (%v), want DEADLINE_EXCEEDED", status.Code(err), err)
	}
	if bare := late(); took < timeout || took > timeout+2*bare+150*time.Millisecond {
		t.Errorf("took %v, want the %v attempt timeout (a bare wait for it woke %v late)", took, timeout, bare)
	}
	eventually(t, "server saw the call cancelled", func() bool { return srv.Cancelled(getStock) == 1 })
}

func TestUnavailableIsRetriedMaxAttemptsWithBackoff(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	rt := inventory(t, policy.Service{
		Budget:  &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute},
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retry}},
	})
	// The baseline: the same attempts without retries, to a server of
	// their own, interleaved with the retried calls so that they see the
	// same load. What the retried calls take beyond it is the backoff.
	_, baseCC := start(t, server.Fail(codes.Unavailable))
	base := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true}}})
	const calls = 10
	var took, attempts time.Duration
	for range calls {
		begin := time.Now()
		_, err := callGetStock(context.Background(), rt, cc)
		took += time.Since(begin)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("code = %v, want UNAVAILABLE", status.Code(err))
		}
		begin = time.Now()
		for range 3 {
			if _, err := callGetStock(context.Background(), base, baseCC); status.Code(err) != codes.Unavailable {
				t.Fatalf("baseline: code = %v, want UNAVAILABLE", status.Code(err))
			}
		}
		attempts += time.Since(begin)
	}
	if got := srv.Calls(getStock); got != calls*3 {
		t.Fatalf("server saw %d calls, want exactly %d (3 attempts each)", got, calls*3)
	}
	// Waits are drawn from [0, 20ms) then [0, 40ms): 300ms expected over 10
	// calls, never more than 600ms. Without backoff it would take the
	// baseline's few ms. The lower bound is 4 standard deviations under
	// the mean; the upper one is the 600ms plus the attempts themselves
	// (the baseline) plus 200ms for the scheduler to wake 20 timers late.
	t.Logf("10 calls of 3 attempts took %v; 30 attempts without backoff %v", took, attempts)
	if took-attempts < 120*time.Millisecond {
		t.Errorf("10 calls with 2 backoffs each took %v, 30 attempts alone %v: the retries were not spaced out", took, attempts)
	}
	if took > 600*time.Millisecond+attempts+200*time.Millisecond {
		t.Errorf("took %v (30 attempts alone %v), more than the backoff bounds allow", took, attempts)
	}
}

func TestAnswersAreNotRetriedAndKeepTheBreakerClosed(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.FailedPrecondition))
	rt := inventory(t, policy.Service{
		Breaker: breakerPolicy(5, 1),
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retryPolicy(3)}},
	})
	for range 30 {
		_, err := callGetStock(context.Background(), rt, cc)
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("code = %v, want FAILED_PRECONDITION", status.Code(err))
		}
	}
	if got := srv.Calls(getStock); got != 30 {
		t.Errorf("server saw %d calls, want 30: an answer is never retried", got)
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateClosed {
		t.Errorf("breaker %v, want closed: FAILED_PRECONDITION is an answer", s)
	}
}

func TestNotIdempotentIsNeverRetried(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	rt, err := runtime.NewClient(&policy.Service{
		Name:    "example.payments.v1.PaymentsService",
		Methods: []policy.Method{{Name: charge, Timeout: time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	plain := paymentsv1.NewPaymentsServiceClient(cc)
	_, err = runtime.Unary(context.Background(), rt.Method(0), "", &paymentsv1.ChargeRequest{OrderId: "o1"}, nil, plain.Charge, nil)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code = %v, want UNAVAILABLE", status.Code(err))
	}
	if got := srv.Calls(charge); got != 1 {
		t.Errorf("server saw %d charges, want exactly 1", got)
	}

	// Validation refuses a retry policy on such a method outright.
	_, err = runtime.NewClient(&policy.Service{
		Name:    "example.payments.v1.PaymentsService",
		Methods: []policy.Method{{Name: charge, Retry: retryPolicy(3)}},
	})
	if err == nil {
		t.Fatal("NewClient accepted retries on a method that is neither idempotent nor keyed")
	}
}

func TestIdempotencyKeyMakesRetriesSafeAndIsIdentical(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: reserveStock, IdempotencyKey: "order_id", Retry: retryPolicy(3)},
	}})
	plain := inventoryv1.NewInventoryServiceClient(cc)
	req := &inventoryv1.ReserveStockRequest{OrderId: "order-7", Sku: "apple", Units: 1}
	_, err := runtime.Unary(context.Background(), rt.Method(0), req.GetOrderId(), req, nil, plain.ReserveStock, nil)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code = %v, want UNAVAILABLE", status.Code(err))
	}
	keys := srv.Keys(reserveStock)
	if len(keys) != 3 || keys[0] != "order-7" || keys[1] != "order-7" || keys[2] != "order-7" {
		t.Fatalf("keys seen by the server = %q, want order-7 on each of 3 attempts", keys)
	}

	// Without a key value the method is not retried: it is not idempotent.
	_, _ = runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.ReserveStockRequest{}, nil, plain.ReserveStock, nil)
	if got := srv.Calls(reserveStock); got != 4 {
		t.Errorf("server saw %d calls, want 4: a call without a key is made once", got)
	}
}

func TestBreakerOpensFailsFastProbesAndCloses(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	clock := newFakeClock()
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(4, 2)}, runtime.WithClock(clock))
	ctx := context.Background()

	for range 4 {
		if _, err := callGetStock(ctx, rt, cc); status.Code(err) != codes.Unavailable {
			t.Fatalf("code = %v, want UNAVAILABLE", status.Code(err))
		}
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("after 4 failures of 4 (minimum 4, ratio 0.5) the breaker is %v, want open", s)
	}
	begin := time.Now()
	_, err := callGetStock(ctx, rt, cc)
	if !errors.Is(err, runtime.ErrCircuitOpen) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want ErrCircuitOpen with code UNAVAILABLE", err)
	}
	if took := time.Since(begin); took > 20*time.Millisecond {
		t.Errorf("refusal took %v: an open breaker fails fast", took)
	}
	if got := srv.Calls(getStock); got != 4 {
		t.Fatalf("server saw %d calls, want 4: nothing passes an open breaker", got)
	}

	// After the cool-down exactly 2 probes pass; they succeed and it closes.
	clock.Advance(10 * time.Second)
	srv.SetBehaviour(server.Slow(100 * time.Millisecond))
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for range 6 {
		wg.Go(func() {
			_, err := callGetStock(ctx, rt, cc)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, runtime.ErrCircuitOpen):
				refused.Add(1)
			default:
				t.Errorf("unexpected error %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 2 || refused.Load() != 4 || srv.Calls(getStock) != 6 {
		t.Fatalf("half-open: %d ok, %d refused, server saw %d; want exactly 2 probes through", ok.Load(), refused.Load(), srv.Calls(getStock)-4)
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateClosed {
		t.Fatalf("breaker %v after both probes succeeded, want closed", s)
	}

	// Open it again; this time the probe fails and it opens at once.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	for range 4 {
		_, _ = callGetStock(ctx, rt, cc)
	}
	clock.Advance(10 * time.Second)
	if _, err := callGetStock(ctx, rt, cc); status.Code(err) != codes.Unavailable || errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("probe: err = %v, want the server's UNAVAILABLE", err)
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v after a failed probe, want open", s)
	}
	if got := srv.Calls(getStock); got != 11 {
		t.Errorf("server saw %d calls, want 11", got)
	}
}

func TestOpenBreakerEndsTheRetryLoop(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	rt := inventory(t, policy.Service{
		Breaker: breakerPolicy(2, 1),
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retryPolicy(5)}},
	})
	_, err := callGetStock(context.Background(), rt, cc)
	if !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("err = %v, want the retry loop ended by the open breaker", err)
	}
	var rerr *runtime.Error
	if !errors.As(err, &rerr) || status.Code(rerr.Cause) != codes.Unavailable {
		t.Errorf("the refusal should carry the last real error as its cause, got %v", err)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d calls, want 2: the breaker opened after 2 failures and the loop stopped", got)
	}
}

// TestBulkheadRefusesWithinMaxWaitWhileOtherDependencyProceeds: two slow
// calls (held 800 ms by the server) take both of inventory's permits; a
// third is refused RESOURCE_EXHAUSTED at the 50 ms max wait, bounded by
// it plus twice what a bare 50 ms wait beside it woke late plus 100 ms
// (a fixed 150 ms was exceeded at load 18). A payments call meanwhile is
// answered while both inventory permits are still taken: it waited for
// none of them, and took at most 100 ms plus twice that lateness.
func TestBulkheadRefusesWithinMaxWaitWhileOtherDependencyProceeds(t *testing.T) {
	const hold, maxWait = 800 * time.Millisecond, 50 * time.Millisecond
	srv, cc := start(t, func(ctx context.Context, c server.Call) error {
		if c.Method == getStock {
			return server.Wait(ctx, hold)
		}
		return nil
	})
	readyConn(t, cc)
	rt := inventory(t, policy.Service{Bulkhead: &policy.Bulkhead{Permits: 2, MaxWait: maxWait}})
	payments, err := runtime.NewClient(&policy.Service{
		Name:     "example.payments.v1.PaymentsService",
		Bulkhead: &policy.Bulkhead{Permits: 2},
		Methods:  []policy.Method{{Name: charge}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := callGetStock(ctx, rt, cc); err != nil {
				t.Errorf("slow call: %v", err)
			}
		})
	}
	eventually(t, "both permits taken", func() bool { n, _ := rt.BulkheadInUse(getStock); return n == 2 })

	begin := time.Now()
	late := bareWait(maxWait)
	_, err = callGetStock(ctx, rt, cc)
	took := time.Since(begin)
	if !errors.Is(err, runtime.ErrBulkheadFull) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v, want ErrBulkheadFull with RESOURCE_EXHAUSTED", err)
	}
	if bare := late(); took < maxWait || took > maxWait+2*bare+100*time.Millisecond {
		t.Errorf("refused after %v, want the %v max wait (a bare wait for it woke %v late)", took, maxWait, bare)
	}

	begin = time.Now()
	late = bareWait(100 * time.Millisecond)
	_, err = runtime.Unary(ctx, payments.Method(0), "", &paymentsv1.ChargeRequest{OrderId: "o"}, nil,
		paymentsv1.NewPaymentsServiceClient(cc).Charge, nil)
	took = time.Since(begin)
	inUse, _ := rt.BulkheadInUse(getStock)
	if err != nil || inUse != 2 {
		t.Errorf("payments call: err %v after %v, with %d of inventory's permits taken at its end, want 2: another dependency must not wait for inventory's bulkhead", err, took, inUse)
	}
	if bare := late(); took > 100*time.Millisecond+2*bare {
		t.Errorf("payments call took %v, want at most 100ms (a bare wait beside it woke %v late)", took, bare)
	}
	wg.Wait()
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d GetStock calls, want 2: the refused call never left", got)
	}
	if n, _ := rt.BulkheadInUse(getStock); n != 0 {
		t.Errorf("%d permits still taken after every call ended", n)
	}
}

func TestRetryBudgetBoundsLoadDuringOutage(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	const n, ratio, floor = 200, 0.1, 5
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Microsecond, MaxBackoff: time.Microsecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	rt := inventory(t, policy.Service{
		Budget:  &policy.Budget{Ratio: ratio, MinRetries: floor, Window: time.Minute},
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retry}},
	})
	exhausted := 0
	for range n {
		_, err := callGetStock(context.Background(), rt, cc)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("code = %v, want UNAVAILABLE (the last real error)", status.Code(err))
		}
		if errors.Is(err, runtime.ErrBudgetExhausted) {
			exhausted++
		}
	}
	got := srv.Calls(getStock)
	if limit := int(n*(1+ratio)) + floor; got > limit {
		t.Errorf("server saw %d calls for %d requests, want at most %d (N×(1+ratio)+floor)", got, n, limit)
	}
	if got < n+floor {
		t.Errorf("server saw %d calls, want at least %d: the floor and ratio allow retries", got, n+floor)
	}
	if exhausted == 0 {
		t.Error("no call reported ErrBudgetExhausted")
	}
}

func TestCallerCancellationStaysCanceledAndLeavesBreaker(t *testing.T) {
	_, cc := start(t, server.Hang)
	rt := inventory(t, policy.Service{
		Breaker: &policy.Breaker{FailureRatio: 0.1, MinimumCalls: 1, Window: time.Minute, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded, codes.Canceled)},
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	_, err := callGetStock(ctx, rt, cc)
	if status.Code(err) != codes.Canceled {
		t.Fatalf("code = %v, want CANCELED", status.Code(err))
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateClosed {
		t.Errorf("breaker %v: the caller's cancellation must count as nothing", s)
	}
}

func TestNoBackoffPastTheDeadline(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: 10 * time.Second, MaxBackoff: 10 * time.Second,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retry}}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := callGetStock(ctx, rt, cc)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code = %v (%v), want the last real error, UNAVAILABLE", status.Code(err), err)
	}
	if took := time.Since(begin); took > 250*time.Millisecond {
		t.Errorf("took %v: the backoff must not sleep past the 200ms deadline", took)
	}
	if got := srv.Calls(getStock); got > 2 {
		t.Errorf("server saw %d calls", got)
	}
}

func TestOverallTimeoutBoundsEveryAttempt(t *testing.T) {
	// The server notes the time its call had left when it arrived: the
	// deadline the attempt was sent with, whatever the load.
	left := make(chan time.Duration, 1)
	_, cc := start(t, func(ctx context.Context, c server.Call) error {
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Now().Add(time.Hour)
		}
		select {
		case left <- time.Until(dl):
		default:
		}
		return server.Wait(ctx, 10*time.Second)
	})
	rt := inventory(t, policy.Service{Methods: []policy.Method{{
		Name: getStock, Idempotent: true, OverallTimeout: 150 * time.Millisecond,
	}}})
	begin := time.Now()
	late := bareWait(150 * time.Millisecond)
	_, err := callGetStock(context.Background(), rt, cc)
	took := time.Since(begin)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("code = %v, want DEADLINE_EXCEEDED", status.Code(err))
	}
	// (On a loaded machine the limit may pass before the attempt is sent,
	// or before its handler runs: no time left is within the limit too.)
	select {
	case d := <-left:
		if d > 150*time.Millisecond {
			t.Errorf("the attempt reached the server with %v left, want at most the 150ms overall limit", d)
		}
	case <-time.After(time.Second):
		t.Log("the attempt never reached the server: the limit passed before it was sent")
	}
	// The call ends at the limit, give or take the scheduler: twice what
	// it made a bare wait for the same limit late (the limit's timer wakes
	// the attempt, which wakes the caller), plus 100ms. Far from the
	// server's 10s.
	bare := late()
	if took < 150*time.Millisecond || took > 150*time.Millisecond+2*bare+100*time.Millisecond {
		t.Errorf("took %v, want the 150ms overall limit (a bare wait for it woke %v late)", took, bare)
	}
}

func TestFallbackSeesFinalErrorButNotAnswers(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	rt := inventory(t, policy.Service{})
	plain := inventoryv1.NewInventoryServiceClient(cc)
	var seen error
	fallback := func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
		seen = err
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	}
	resp, err := runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, fallback)
	if err != nil || resp.GetUnits() != -1 || status.Code(seen) != codes.Unavailable {
		t.Fatalf("resp %v err %v, fallback saw %v; want the fallback's answer after UNAVAILABLE", resp, err, seen)
	}
	srv.SetBehaviour(server.Fail(codes.NotFound))
	seen = nil
	_, err = runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, fallback)
	if status.Code(err) != codes.NotFound || seen != nil {
		t.Fatalf("err %v, fallback saw %v; NOT_FOUND is an answer and must reach the caller", err, seen)
	}
}

func TestBadInputsAreClearErrors(t *testing.T) {
	_, cc := start(t, server.Healthy)
	rt := inventory(t, policy.Service{})
	plain := inventoryv1.NewInventoryServiceClient(cc)
	if _, err := runtime.Unary[inventoryv1.GetStockRequest](context.Background(), rt.Method(0), "", nil, nil, plain.GetStock, nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("nil request: %v, want INVALID_ARGUMENT", err)
	}
	//nolint:staticcheck // a nil context is the point of the test
	if _, err := runtime.Unary(nil, rt.Method(0), "", &inventoryv1.GetStockRequest{}, nil, plain.GetStock, nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("nil context: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := runtime.Unary(context.Background(), nil, "", &inventoryv1.GetStockRequest{}, nil, plain.GetStock, nil); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("nil method: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := runtime.NewClient(nil); err == nil {
		t.Error("NewClient(nil) accepted")
	}
	if _, err := runtime.NewClient(&policy.Service{Name: "x"}, nil); err == nil {
		t.Error("NewClient with a nil option accepted")
	}
}

func TestStreamGetsBulkheadAndBreakerAndReleasesAtEnd(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	clock := newFakeClock()
	rt := inventory(t, policy.Service{
		Breaker:  breakerPolicy(3, 1),
		Bulkhead: &policy.Bulkhead{Permits: 1},
		Methods:  []policy.Method{{Name: watchStock, Kind: policy.KindServerStreaming, Timeout: 5 * time.Second}},
	}, runtime.WithClock(clock))
	client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	ctx := context.Background()

	st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rt.BulkheadInUse(watchStock); n != 1 {
		t.Fatalf("permits in use while the stream is open = %d, want 1", n)
	}
	if _, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "b"}); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("second stream: %v, want ErrBulkheadFull", err)
	}
	got := 0
	for {
		_, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != 3 {
		t.Errorf("received %d messages, want 3", got)
	}
	if n, _ := rt.BulkheadInUse(watchStock); n != 0 {
		t.Errorf("permits in use after the stream ended = %d, want 0", n)
	}

	// A failing stream counts against the breaker; once open, opening fails fast.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	for range 2 {
		st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("recv: %v, want UNAVAILABLE", err)
		}
	}
	if _, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("after 2 failed streams: %v, want ErrCircuitOpen", err)
	}
	if got := srv.Calls(watchStock); got != 3 {
		t.Errorf("server saw %d streams, want 3", got)
	}
}

func TestAbandonedStreamFreesItsPermitWhenItsContextEnds(t *testing.T) {
	_, cc := start(t, server.Hang)
	rt := inventory(t, policy.Service{
		Bulkhead: &policy.Bulkhead{Permits: 1},
		Methods:  []policy.Method{{Name: watchStock, Kind: policy.KindServerStreaming}},
	})
	client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	cancel() // the caller walks away without reading
	eventually(t, "permit freed", func() bool { n, _ := rt.BulkheadInUse(watchStock); return n == 0 })
}
