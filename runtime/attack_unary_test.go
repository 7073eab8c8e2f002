package runtime_test

// Black-box attacks on the promises the README makes about unary calls,
// through the generated example clients against real loopback servers that
// misbehave on purpose. Each test counts what the server saw.

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atkNoLeak fails the test if a goroutine it started outlives it. Call it
// first: its cleanup then runs last, after the connections are closed.
func atkNoLeak(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// newAtkClock is a fakeClock (integration_test.go) for the attack tests.
func newAtkClock() *fakeClock { return &fakeClock{now: time.Unix(2_000_000, 0)} }

// atkInventory builds the generated inventory client with its annotated
// policy edited by edit (nil for none), the cache and the rate limit taken
// out first (withoutCacheAndRateLimit), so that counts are the layers' under test.
func atkInventory(t *testing.T, cc grpc.ClientConnInterface, o inventoryv1.InventoryServiceResilientOptions,
	edit func(p *policy.Service)) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	o.Runtime = append(o.Runtime, runtime.WithPolicy(func(p *policy.Service) {
		withoutCacheAndRateLimit(p)
		if edit != nil {
			edit(p)
		}
	}))
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// atkMethod returns the entry of the named method in p.
func atkMethod(p *policy.Service, name string) *policy.Method {
	for i := range p.Methods {
		if p.Methods[i].Name == name {
			return &p.Methods[i]
		}
	}
	panic("no method " + name)
}

// atkHold answers only when release is closed (or the caller gives up).
func atkHold(release <-chan struct{}) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// atkPushback answers UNAVAILABLE with the raw trailer value v.
func atkPushback(v string) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, v)); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected, pushback "+v)
	}
}

// atkWantNoPermits fails the test if method's bulkhead still has a permit
// taken (or method has no bulkhead, where a count of 0 would prove nothing).
func atkWantNoPermits(t *testing.T, rt *runtime.Client, method, after string) {
	t.Helper()
	if n := atkInUse(t, rt, method); n != 0 {
		t.Errorf("%d permits %s", n, after)
	}
}

// atkWantBreaker fails the test unless method's breaker is in state want;
// format has one %v, for the state found.
func atkWantBreaker(t *testing.T, rt *runtime.Client, method string, want runtime.State, format string) {
	t.Helper()
	if s, _ := rt.BreakerState(method); s != want {
		t.Errorf(format, s)
	}
}

func atkWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// A bound for a loaded machine: a condition that holds returns at once.
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var (
	atkGetStock    = inventoryv1.InventoryService_GetStock_FullMethodName
	atkStockReport = inventoryv1.InventoryService_StockReport_FullMethodName
	atkWatchStock  = inventoryv1.InventoryService_WatchStock_FullMethodName
	atkCharge      = paymentsv1.PaymentsService_Charge_FullMethodName
)

// Charge is neither idempotent nor keyed: whatever the server or the
// network does, it reaches the server once, and no edit of the policy can
// make the runtime repeat it.
//
// Each call starts on a connection made first, with a 500 ms timeout, so
// that on a loaded machine the request reaches the server before it is
// cut (with 100 ms and a dial inside it, at load 8 the server saw none).
// The restart the server starts mid-call is waited for before the server
// is stopped: left running, it came up again after the test's Stop, and
// the goroutine-leak check found that incarnation's accept loop.
func TestAttackChargeIsNeverRepeated(t *testing.T) {
	atkNoLeak(t)
	for _, tc := range []struct {
		name string
		b    func(fs *faultserver.Server, bg *sync.WaitGroup) server.Behaviour
	}{
		{"unavailable", func(*faultserver.Server, *sync.WaitGroup) server.Behaviour { return server.Fail(codes.Unavailable) }},
		{"unavailable with pushback 0", func(*faultserver.Server, *sync.WaitGroup) server.Behaviour { return atkPushback("0") }},
		{"connection reset mid-call", func(fs *faultserver.Server, _ *sync.WaitGroup) server.Behaviour { return fs.Reset() }},
		{"hung past the timeout", func(*faultserver.Server, *sync.WaitGroup) server.Behaviour { return server.Hang }},
		{"server restarting mid-call", func(fs *faultserver.Server, bg *sync.WaitGroup) server.Behaviour {
			return func(ctx context.Context, c server.Call) error {
				bg.Go(func() { _ = fs.Restart(20 * time.Millisecond) })
				return server.Hang(ctx, c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, cc := startFault(t, server.Healthy)
			readyConn(t, cc)
			var bg sync.WaitGroup // what the behaviour started: done before the server stops
			t.Cleanup(bg.Wait)
			fs.SetBehaviour(tc.b(fs, &bg))
			c, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
					p.Methods[0].Timeout = 500 * time.Millisecond
				})}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Charge(context.Background(), &paymentsv1.ChargeRequest{OrderId: "o-1", AmountCents: 100}); err == nil {
				t.Fatal("Charge succeeded against a failing server")
			}
			time.Sleep(50 * time.Millisecond) // a repeat, if any, would arrive now
			if got := fs.Calls(atkCharge); got != 1 {
				t.Errorf("the server saw %d charges, want 1", got)
			}
		})
	}
}

// An edit that asks for retries, hedging or a cache on Charge is refused
// at construction.
func TestAttackEditCannotRepeatCharge(t *testing.T) {
	_, cc := startFault(t, server.Healthy)
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	for _, tc := range []struct {
		name string
		edit func(m *policy.Method)
		want string // what the refusal says: the edit refused, not another
	}{
		{"retry", func(m *policy.Method) { m.Retry = retry }, "Charge).Retry: Charge is not idempotent"},
		{"hedging", func(m *policy.Method) {
			m.Hedging = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		}, "Charge).Hedging: Charge is not idempotent"},
		{"cache", func(m *policy.Method) {
			m.Cache = &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 1, KeyFields: []string{"order_id"}}
		}, "Charge).Cache: Charge is not idempotent"},
		// The README: idempotent and the keys are the service's contract,
		// not settings: no edit can make a method safe to repeat.
		{"declared idempotent, then retried", func(m *policy.Method) { m.Idempotent = true; m.Retry = retry }, "Charge: Idempotent changed from false to true"},
		{"declared idempotent, then hedged", func(m *policy.Method) {
			m.Idempotent = true
			m.Hedging = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		}, "Charge: Idempotent changed from false to true"},
		{"a generated key, then retried", func(m *policy.Method) { m.GenerateIdempotencyKey = true; m.Retry = retry },
			"Charge: GenerateIdempotencyKey changed from false to true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{
				Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) { tc.edit(&p.Methods[0]) })}})
			if err == nil {
				t.Fatalf("the edit (%s) of Charge was accepted", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the edit (%s) of Charge was refused with %v, want the refusal saying %q", tc.name, err, tc.want)
			}
		})
	}
}

// Answers, the caller's own cancellations and the runtime's own refusals
// never open the breaker; only failures do.
func TestAttackOnlyFailuresOpenTheBreaker(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, server.Healthy)
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) {
			p.Breaker.MinimumCalls = 4
			p.Bulkhead = &policy.Bulkhead{Permits: 2}
			atkMethod(p, atkStockReport).Timeout = 5 * time.Second
		})
	rt := c.Runtime()
	ctx := context.Background()
	req := &inventoryv1.StockReportRequest{Warehouse: "w"}
	closed := func(what string) {
		t.Helper()
		if s, _ := rt.BreakerState(atkStockReport); s != runtime.StateClosed {
			t.Fatalf("after %s the breaker is %v, want closed", what, s)
		}
	}

	for _, code := range []codes.Code{codes.NotFound, codes.FailedPrecondition, codes.InvalidArgument, codes.AlreadyExists,
		codes.PermissionDenied, codes.ResourceExhausted, codes.Aborted} {
		fs.SetBehaviour(server.Fail(code))
		for range 10 {
			if _, err := c.StockReport(ctx, req); status.Code(err) != code {
				t.Fatalf("got %v, want the answer %v as it is", err, code)
			}
		}
	}
	closed("70 answers")

	fs.SetBehaviour(faultserver.Pushback(codes.ResourceExhausted, 500*time.Millisecond))
	for range 10 {
		if _, err := c.StockReport(ctx, req); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
		}
	}
	closed("10 pushbacks with RESOURCE_EXHAUSTED")

	// Cancelled by their caller while the server holds them.
	fs.SetBehaviour(atkHold(release))
	for range 10 {
		cctx, cancel := context.WithCancel(ctx)
		n := fs.Calls(atkStockReport)
		go func() {
			atkWaitFor(t, "the call arrives", func() bool { return fs.Calls(atkStockReport) > n })
			cancel()
		}()
		if _, err := c.StockReport(cctx, req); status.Code(err) != codes.Canceled {
			t.Fatalf("got %v, want CANCELED", err)
		}
	}
	closed("10 calls cancelled by their caller")

	// The bulkhead's refusals: two calls hold its permits, ten are refused.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = c.StockReport(ctx, req) })
	}
	atkWaitFor(t, "two calls hold the permits", func() bool { n, _ := rt.BulkheadInUse(atkStockReport); return n == 2 })
	for range 10 {
		_, err := c.StockReport(ctx, req)
		if !errors.Is(err, runtime.ErrBulkheadFull) || status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ErrBulkheadFull with RESOURCE_EXHAUSTED", err)
		}
	}
	close(release)
	wg.Wait()
	closed("10 bulkhead refusals")

	// Failures do open it, once the successes above left the window.
	clk.Advance(3 * time.Second)
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	for range 8 {
		_, _ = c.StockReport(ctx, req)
	}
	if s, _ := rt.BreakerState(atkStockReport); s != runtime.StateOpen {
		t.Fatalf("after 8 UNAVAILABLE the breaker is %v, want open", s)
	}
	_, err := c.StockReport(ctx, req)
	if !errors.Is(err, runtime.ErrCircuitOpen) || status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want ErrCircuitOpen with UNAVAILABLE", err)
	}
	var re *runtime.Error
	if !errors.As(err, &re) || re.RetryAfter <= 0 {
		t.Fatalf("got %v, want a *runtime.Error saying how long is left", err)
	}
}

// The README's opening: answers never open a breaker. An edit that lists
// an answer (NOT_FOUND) among the failure codes is refused, for that.
func TestAttackAnswersCannotBeListedAsFailures(t *testing.T) {
	_, cc := startFault(t, server.Healthy)
	_, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker.FailureCodes = policy.CodesOf(codes.Unavailable, codes.NotFound)
		})}})
	if err == nil {
		t.Fatal("a breaker that counts NOT_FOUND as a failure was accepted")
	}
	if want := "Breaker.FailureCodes: holds [NOT_FOUND], answers of the service"; !strings.Contains(err.Error(), want) {
		t.Fatalf("refused with %v, want the refusal saying %q", err, want)
	}
}

// However many calls arrive at once when the cool-down ends, the server
// sees exactly HalfOpenProbes of them; the rest are refused at once.
func TestAttackHalfOpenAdmitsOnlyItsProbesUnderABurst(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) {
			p.Breaker.MinimumCalls = 4
			p.Bulkhead = nil
			atkMethod(p, atkStockReport).Timeout = 5 * time.Second
		})
	ctx := context.Background()
	req := &inventoryv1.StockReportRequest{Warehouse: "w"}
	for range 4 {
		_, _ = c.StockReport(ctx, req)
	}
	if s, _ := c.Runtime().BreakerState(atkStockReport); s != runtime.StateOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	before := fs.Calls(atkStockReport)
	fs.SetBehaviour(atkHold(release))
	clk.Advance(2*time.Second + time.Millisecond)

	const n = 64
	var refused, ok, other atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-gate
			_, err := c.StockReport(ctx, req)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, runtime.ErrCircuitOpen):
				refused.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	close(gate)
	atkWaitFor(t, "every call either refused or at the server", func() bool {
		return int(refused.Load())+fs.Calls(atkStockReport)-before == n
	})
	time.Sleep(20 * time.Millisecond) // a probe too many would arrive now
	if got := fs.Calls(atkStockReport) - before; got != 3 {
		t.Errorf("the server saw %d calls while half-open, want the 3 probes", got)
	}
	close(release)
	wg.Wait()
	if ok.Load() != 3 || other.Load() != 0 {
		t.Errorf("%d succeeded, %d failed otherwise; want the 3 probes to succeed", ok.Load(), other.Load())
	}
	atkWantBreaker(t, c.Runtime(), atkStockReport, runtime.StateClosed, "after its probes succeeded the breaker is %v, want closed")
}

// N callers failing at once cannot overdraw the retry budget: the server
// sees at most N + ratio×N + min_retries calls.
func TestAttackBudgetHoldsUnderConcurrentCallers(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	clk := newAtkClock() // the window never slides: every retry counts against it
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) {
			p.Breaker = nil
			p.Bulkhead = nil
			p.Budget = &policy.Budget{Ratio: 0.1, MinRetries: 5, Window: 10 * time.Second}
			m := atkMethod(p, atkGetStock)
			m.Retry.MaxAttempts = 5
			m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, 2*time.Millisecond
			// The server answers at once: a long attempt timeout keeps 200
			// callers on a loaded machine from ending by it instead.
			m.Timeout = 10 * time.Second
		})
	const n = 200
	var budget atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-gate
			_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
			if status.Code(err) != codes.Unavailable {
				t.Errorf("got %v, want UNAVAILABLE", err)
			}
			if errors.Is(err, runtime.ErrBudgetExhausted) {
				budget.Add(1)
			}
		})
	}
	close(gate)
	wg.Wait()
	got := fs.Calls(atkGetStock)
	if limit := n + n/10 + 5; got > limit || got < n {
		t.Errorf("the server saw %d calls from %d callers, want between %d and %d (ratio 0.1, floor 5)", got, n, n, limit)
	}
	if budget.Load() == 0 {
		t.Error("no call ended with ErrBudgetExhausted")
	}
}

// Hedged copies: each one reaches the server, the losers are cancelled
// (the server sees it), count for nothing in the breaker, and the call's
// one permit goes back.
func TestAttackHedgedLosersAreCancelledAndCountForNothing(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, faultserver.PerCall(server.Hang, server.Hang, server.Healthy))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 3 // two losers counted as failures would open it
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Timeout = 2 * time.Second
		m.Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	resp, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	if err != nil || resp.GetUnits() != 42 {
		t.Fatalf("got %v, %v; want the third copy's answer", resp, err)
	}
	if got := fs.Calls(atkGetStock); got != 3 {
		t.Errorf("the server saw %d copies, want 3", got)
	}
	atkWaitFor(t, "both losers cancelled at the server", func() bool { return fs.Cancelled(atkGetStock) == 2 })
	atkWantNoPermits(t, c.Runtime(), atkGetStock, "still taken after the call")
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateClosed, "breaker %v after a hedged success, want closed: the losers count for nothing")
}

// A hedging policy with an absurd number of copies (as an operator may
// write, max_copies is a uint32) is bounded by the retry budget, not
// allocated up front.
func TestAttackHugeMaxCopiesIsBoundedByTheBudget(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Budget = &policy.Budget{Ratio: 0.1, MinRetries: 3, Window: 10 * time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: math.MaxInt, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("the call panicked: %v", r)
			}
		}()
		_, err = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	}()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE", err)
	}
	if got := fs.Calls(atkGetStock); got != 4 {
		t.Errorf("the server saw %d copies, want 4 (the first and the budget's 3)", got)
	}
}

// A deadline shorter than the per-attempt timeout ends the call at the
// deadline, with gRPC's plain DEADLINE_EXCEEDED; a pushback longer than the
// time left ends it at once with the last real error.
func TestAttackDeadlineShorterThanTheAttemptTimeout(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Hang)
	// StockReport's attempt timeout, 300 ms as annotated, is made 5 s: a
	// call that ran to it, ignoring the caller's 60 ms deadline, then takes
	// 5 s, and the bound below can leave a loaded machine the slack it
	// needs (a call that returned after 384 ms against the 300 ms timeout,
	// with the caller's plain DEADLINE_EXCEEDED, was seen in a whole-tree
	// run under -race: the process was not scheduled).
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		atkMethod(p, atkStockReport).Timeout = 5 * time.Second
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"})
	took := time.Since(begin)
	if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrAttemptTimeout) {
		t.Errorf("got %v, want the caller's plain DEADLINE_EXCEEDED", err)
	}
	// The deadline plus 1.94 s of slack, well before the 5 s attempt
	// timeout.
	if took >= 2*time.Second {
		t.Errorf("returned after %v, want at the 60ms deadline, well before the 5s attempt timeout", took)
	}

	// A pushback of 10 s against a deadline of 4 s: a call that waited
	// for the pushback, or for the deadline, takes 4 s; at once is the
	// time of one attempt, bounded here at half the deadline for the
	// slack of a loaded machine.
	fs.SetBehaviour(atkPushback("10000"))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel2()
	begin = time.Now()
	_, err = c.GetStock(ctx2, &inventoryv1.GetStockRequest{Sku: "apple"})
	took = time.Since(begin)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("got %v, want the last real error, UNAVAILABLE", err)
	}
	if took >= 2*time.Second {
		t.Errorf("returned after %v, want at once: the 10s pushback ends after the 4s deadline", took)
	}
	if got := fs.Calls(atkGetStock); got != 1 {
		t.Errorf("the server saw %d calls, want 1", got)
	}
}

// Every form of pushback a server may send: only a whole, non-negative
// number of ms allows the retry; huge values saturate and never wrap to
// an immediate retry.
func TestAttackPushbackValues(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
	})
	for _, tc := range []struct {
		value string
		calls int
	}{
		{"-1", 1}, {"-99999999999999999999", 1}, {"abc", 1}, {"1.5", 1}, {"", 1}, {"1e3", 1}, {"0x10", 1},
		{"0", 3}, {"2", 3},
		{"99999999999999999999", 1}, {"9223372036854775807", 1}, {"288230376151711744", 1},
	} {
		t.Run(tc.value, func(t *testing.T) {
			fs.SetBehaviour(atkPushback(tc.value))
			before := fs.Calls(atkGetStock)
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			defer cancel()
			begin := time.Now()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			if status.Code(err) != codes.Unavailable {
				t.Errorf("got %v, want UNAVAILABLE", err)
			}
			if took := time.Since(begin); took > 150*time.Millisecond {
				t.Errorf("returned after %v, want at once", took)
			}
			if got := fs.Calls(atkGetStock) - before; got != tc.calls {
				t.Errorf("pushback %q: the server saw %d calls, want %d", tc.value, got, tc.calls)
			}
		})
	}
}

// Bad input is refused before anything is sent: a nil context, a nil
// request, a client that was never built.
func TestAttackBadInputsSendNothing(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
	ctx := context.Background()
	var nilReq *inventoryv1.GetStockRequest
	var nilCtx context.Context
	var zero inventoryv1.InventoryServiceResilientClient
	for _, tc := range []struct {
		name string
		code codes.Code
		call func() error
	}{
		{"nil context", codes.InvalidArgument, func() error { _, err := c.GetStock(nilCtx, &inventoryv1.GetStockRequest{}); return err }},
		{"nil request", codes.InvalidArgument, func() error { _, err := c.GetStock(ctx, nil); return err }},
		{"typed nil request", codes.InvalidArgument, func() error { _, err := c.GetStock(ctx, nilReq); return err }},
		{"nil stream context", codes.InvalidArgument, func() error { _, err := c.WatchStock(nilCtx, &inventoryv1.WatchStockRequest{}); return err }},
		{"nil stream request", codes.InvalidArgument, func() error { _, err := c.WatchStock(ctx, nil); return err }},
		{"zero client", codes.FailedPrecondition, func() error { _, err := zero.GetStock(ctx, &inventoryv1.GetStockRequest{}); return err }},
		{"zero client stream", codes.FailedPrecondition, func() error { _, err := zero.WatchStock(ctx, &inventoryv1.WatchStockRequest{}); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.call()
			}()
			if status.Code(err) != tc.code {
				t.Errorf("got %v, want %v", err, tc.code)
			}
		})
	}
	if n := fs.Calls(atkGetStock) + fs.Calls(atkWatchStock); n != 0 {
		t.Errorf("the server saw %d calls, want none", n)
	}
}

// A fallback that answers neither a response nor an error does not turn a
// failure into a success with no response; a fallback that panics gives
// the panic to its caller after every permit went back.
func TestAttackFallbackThatAnswersNothingOrPanics(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Fail(codes.Unavailable))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		StockReportFallback: func(context.Context, *inventoryv1.StockReportRequest, error) (*inventoryv1.StockReportResponse, error) {
			return nil, nil
		},
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			panic("fallback bug")
		},
	}, func(p *policy.Service) { p.Breaker = nil })
	ctx := context.Background()

	resp, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "w"})
	if resp == nil && err == nil {
		t.Error("the call failed and the fallback answered nil, nil: the caller got no response and no error")
	}
	// The call's own error stands: the server's UNAVAILABLE, no response.
	if resp != nil || status.Code(err) != codes.Unavailable {
		t.Errorf("got %v, %v; want no response and the call's UNAVAILABLE", resp, err)
	}

	func() {
		defer func() {
			if r := recover(); r != "fallback bug" {
				t.Errorf("recovered %v, want the fallback's panic", r)
			}
		}()
		_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	}()
	atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after a fallback panicked")
}

// Hedged copies from many callers at once stay within the retry budget,
// as retries do.
func TestAttackHedgesHoldTheBudgetUnderConcurrentCallers(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Hang)
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) {
			p.Breaker = nil
			p.Bulkhead = nil
			p.Budget = &policy.Budget{Ratio: 0.1, MinRetries: 5, Window: 10 * time.Second}
			m := atkMethod(p, atkGetStock)
			m.Retry = nil
			// Long enough for each caller's first copy to reach the server
			// on a loaded machine: the count below starts at one per caller.
			m.Timeout = 400 * time.Millisecond
			m.Hedging = &policy.Hedging{Delay: 2 * time.Millisecond, MaxCopies: 4, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		})
	const n = 100
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-gate
			if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("got %v, want DEADLINE_EXCEEDED", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if got, limit := fs.Calls(atkGetStock), n+n/10+5; got > limit || got < n {
		t.Errorf("the server saw %d copies from %d callers, want between %d and %d", got, n, n, limit)
	}
}

// A caller who gives up while waiting for a bulkhead permit gets
// CANCELED, not a refusal, and no fallback answers it.
func TestAttackCancelWhileWaitingForAPermitStaysCanceled(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	_, cc := startFault(t, atkHold(release))
	var fellBack atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		StockReportFallback: func(context.Context, *inventoryv1.StockReportRequest, error) (*inventoryv1.StockReportResponse, error) {
			fellBack.Add(1)
			return &inventoryv1.StockReportResponse{}, nil
		}}, func(p *policy.Service) {
		p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: 5 * time.Second}
		atkMethod(p, atkStockReport).Timeout = 5 * time.Second
	})
	rt := c.Runtime()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}) })
	atkWaitFor(t, "the permit taken", func() bool { n, _ := rt.BulkheadInUse(atkStockReport); return n == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	begin := time.Now()
	_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{})
	if status.Code(err) != codes.Canceled || errors.Is(err, runtime.ErrBulkheadFull) {
		t.Errorf("got %v, want CANCELED", err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("returned after %v, want at the cancel", took)
	}
	close(release)
	wg.Wait()
	if fellBack.Load() != 0 {
		t.Errorf("the fallback answered %d times, want never for a cancelled caller", fellBack.Load())
	}
	atkWantNoPermits(t, rt, atkStockReport, "taken at the end")
}

// Retries against a server that fails slowly end at the caller's deadline,
// not an attempt later.
func TestAttackRetriesEndAtTheDeadline(t *testing.T) {
	atkNoLeak(t)
	slowFail := func(ctx context.Context, _ server.Call) error {
		if err := server.Wait(ctx, 40*time.Millisecond); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected")
	}
	_, cc := startFault(t, slowFail)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Retry.MaxAttempts = 10
		m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	took := time.Since(begin)
	if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Unavailable {
		t.Errorf("got %v, want DEADLINE_EXCEEDED or the last UNAVAILABLE", err)
	}
	if took > 100*time.Millisecond+30*time.Millisecond {
		t.Errorf("returned after %v, want within a few ms of the 100ms deadline", took)
	}
}

// The runtime's refusal by its own rate limit never reaches the server nor
// counts against the dependency.
func TestAttackRateLimitRefusalsCountForNothing(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) {
			p.Breaker.MinimumCalls = 2
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1}
		})
	ctx := context.Background()
	if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{})
		if !errors.Is(err, runtime.ErrRateLimited) || status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ErrRateLimited with RESOURCE_EXHAUSTED", err)
		}
	}
	if got := fs.Calls(atkStockReport); got != 1 {
		t.Errorf("the server saw %d calls, want 1", got)
	}
	atkWantBreaker(t, c.Runtime(), atkStockReport, runtime.StateClosed, "breaker %v after rate-limit refusals, want closed")
}

// A policy pushed to the limits of its integers builds, calls and refuses
// without a panic, a wrapped duration or an instant half-open.
func TestAttackExtremePolicyValues(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	const most = time.Duration(math.MaxInt64)
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) {
			p.Budget = &policy.Budget{Ratio: 1, MinRetries: math.MaxInt, Window: most}
			p.Breaker = &policy.Breaker{FailureRatio: 1, MinimumCalls: 3, Window: most, CoolDown: most,
				HalfOpenProbes: 1, SlowCallThreshold: most, FailureCodes: policy.CodesOf(codes.Unavailable)}
			p.Bulkhead = &policy.Bulkhead{Permits: math.MaxInt, MaxWait: most}
			p.RateLimit = &policy.RateLimit{RequestsPerSecond: math.MaxFloat64, Burst: math.MaxInt, MaxWait: most}
			m := atkMethod(p, atkGetStock)
			m.Timeout, m.OverallTimeout = most, most
			m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: most,
				Multiplier: math.MaxFloat64, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE (the backoff after the first retry is at most the deadline)", err)
	}
	if s, _ := c.Runtime().BreakerState(atkGetStock); s != runtime.StateOpen && fs.Calls(atkGetStock) >= 3 {
		t.Fatalf("breaker %v after %d failures, want open", s, fs.Calls(atkGetStock))
	}
	for range 2 {
		_, _ = c.StockReport(ctx, &inventoryv1.StockReportRequest{})
	}
	clk.Advance(365 * 24 * time.Hour)
	_, err = c.StockReport(ctx, &inventoryv1.StockReportRequest{})
	var re *runtime.Error
	if !errors.Is(err, runtime.ErrCircuitOpen) || !errors.As(err, &re) || re.RetryAfter < 100*365*24*time.Hour {
		t.Errorf("a year into a cool-down of 292 years: got %v, want ErrCircuitOpen with centuries left", err)
	}
}

// A cached read whose caller's deadline is shorter than the shared call's
// retries: when the caller's deadline runs out before the dependency
// answered, the stale answer kept is served (README, Cache), not
// DEADLINE_EXCEEDED.
func TestAttackCachedCallerDeadlineGetsTheLastErrorOrStale(t *testing.T) {
	atkNoLeak(t)
	slowFail := func(ctx context.Context, _ server.Call) error {
		if err := server.Wait(ctx, 30*time.Millisecond); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected")
	}
	fs, cc := startFault(t, server.Healthy)
	clk := newAtkClock()
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithClock(clk), runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker, p.RateLimit = nil, nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second) // no longer fresh, still within stale_ttl
	fs.SetBehaviour(slowFail)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		resp, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		cancel()
		if err != nil || resp.GetSku() != "apple" {
			t.Fatalf("got %v, %v; want the stale answer for apple", resp, err)
		}
		time.Sleep(300 * time.Millisecond) // the shared call ends
	}
}

// atkWithDetail answers UNAVAILABLE carrying detail.
func atkWithDetail(detail protoadapt.MessageV1) server.Behaviour {
	return func(context.Context, server.Call) error {
		st, err := status.New(codes.Unavailable, "injected with a detail").WithDetails(detail)
		if err != nil {
			return err
		}
		return st.Err()
	}
}

// The do-not-retry mark stops the retries; retries that ran out keep the
// last error's code and details, match ErrRetriesExhausted and nothing else.
func TestAttackDoNotRetryMarkAndExhaustedRetries(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, atkWithDetail(&errdetails.ErrorInfo{Reason: runtime.DoNotRetryReason, Domain: runtime.DoNotRetryDomain}))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
	})
	ctx := context.Background()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE", err)
	}
	if got := fs.Calls(atkGetStock); got != 1 {
		t.Errorf("a call marked do-not-retry reached the server %d times, want 1", got)
	}

	fs.SetBehaviour(atkWithDetail(&errdetails.DebugInfo{Detail: "disk on fire"}))
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	if got := fs.Calls(atkGetStock); got != 1+3 {
		t.Errorf("the server saw %d calls, want 3 more", got-1)
	}
	if !errors.Is(err, runtime.ErrRetriesExhausted) || status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want ErrRetriesExhausted with UNAVAILABLE", err)
	}
	for _, s := range []error{runtime.ErrCircuitOpen, runtime.ErrBulkheadFull, runtime.ErrBudgetExhausted, runtime.ErrRateLimited, runtime.ErrAttemptTimeout} {
		if errors.Is(err, s) {
			t.Errorf("%v matches %v", err, s)
		}
	}
	st, _ := status.FromError(err)
	found := false
	for _, d := range st.Details() {
		if di, ok := d.(*errdetails.DebugInfo); ok && di.GetDetail() == "disk on fire" {
			found = true
		}
	}
	if !found {
		t.Errorf("details %v, want the last error's DebugInfo kept", st.Details())
	}
}

// A cached read: an answer is never hidden by a stale value; a failure is;
// a caller who cancels gets CANCELED, not the stale value nor the fallback.
func TestAttackCacheHidesFailuresButNotAnswers(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	clk := newAtkClock()
	var fellBack atomic.Int32
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			fellBack.Add(1)
			return &inventoryv1.GetStockResponse{Units: -1}, nil
		},
		Runtime: []runtime.Option{runtime.WithClock(clk), runtime.WithPolicy(func(p *policy.Service) {
			p.Breaker, p.RateLimit = nil, nil
			atkMethod(p, atkGetStock).Retry = nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := &inventoryv1.GetStockRequest{Sku: "apple"}
	if _, err := c.GetStock(ctx, req); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)

	fs.SetBehaviour(server.Fail(codes.Unavailable))
	if resp, err := c.GetStock(ctx, req); err != nil || resp.GetUnits() != 42 {
		t.Errorf("a failure with a stale answer kept: got %v, %v; want the stale 42", resp, err)
	}
	fs.SetBehaviour(server.Fail(codes.NotFound))
	if _, err := c.GetStock(ctx, req); status.Code(err) != codes.NotFound {
		t.Errorf("an answer with a stale value kept: got %v, want NOT_FOUND as it is", err)
	}
	release := make(chan struct{})
	fs.SetBehaviour(atkHold(release))
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := c.GetStock(cctx, req); status.Code(err) != codes.Canceled {
		t.Errorf("a caller who cancelled: got %v, want CANCELED", err)
	}
	close(release)
	if fellBack.Load() != 0 {
		t.Errorf("the fallback answered %d times, want never", fellBack.Load())
	}
	atkWaitFor(t, "the shared call over", func() bool { n, _ := c.Runtime().BulkheadInUse(atkGetStock); return n == 0 })
}

// A panic in a cached call (here an interceptor of the connection) reaches
// every caller waiting for it, and nothing stays taken.
func TestAttackPanicInACachedCallReachesItsCallers(t *testing.T) {
	atkNoLeak(t)
	fs, err := faultserver.Start(server.Slow(30 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Stop()
	cc, err := grpc.NewClient(fs.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			_ = invoker(ctx, method, req, reply, cc, opts...)
			panic("codec bug")
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var panics atomic.Int32
	for range 3 {
		wg.Go(func() {
			defer func() {
				if r := recover(); r == "codec bug" {
					panics.Add(1)
				}
			}()
			_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		})
	}
	wg.Wait()
	if panics.Load() != 3 {
		t.Errorf("%d of 3 callers saw the panic", panics.Load())
	}
	atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after the panic")
	atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateClosed, "breaker %v, want closed: a panic counts for nothing")
}

// An outcome that comes back after the breaker changed state is not
// counted against the new one: a slow failure admitted while closed,
// ending after the breaker opened and closed again, does not count.
func TestAttackLateOutcomeIsNotCountedInTheNewState(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	holdThenFail := func(ctx context.Context, _ server.Call) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return status.Error(codes.Unavailable, "late failure")
	}
	fail := server.Fail(codes.Unavailable)
	fs, cc := startFault(t, faultserver.PerCall(holdThenFail, fail, fail, fail, fail,
		server.Healthy, server.Healthy, server.Healthy, fail))
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) {
			p.Breaker.MinimumCalls = 4
			p.Bulkhead = nil
			atkMethod(p, atkStockReport).Timeout = 5 * time.Second
		})
	rt := c.Runtime()
	ctx := context.Background()
	req := &inventoryv1.StockReportRequest{}
	late := make(chan error, 1)
	go func() { _, err := c.StockReport(ctx, req); late <- err }()
	atkWaitFor(t, "the slow call at the server", func() bool { return fs.Calls(atkStockReport) == 1 })
	for range 4 {
		_, _ = c.StockReport(ctx, req)
	}
	if s, _ := rt.BreakerState(atkStockReport); s != runtime.StateOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	clk.Advance(2*time.Second + time.Millisecond)
	for range 3 {
		if _, err := c.StockReport(ctx, req); err != nil {
			t.Fatalf("probe: %v", err)
		}
	}
	if s, _ := rt.BreakerState(atkStockReport); s != runtime.StateClosed {
		t.Fatalf("breaker %v after 3 probes, want closed", s)
	}
	close(release)
	if err := <-late; status.Code(err) != codes.Unavailable {
		t.Fatalf("the slow call: %v", err)
	}
	// Three failures more: the window holds 3 if the late one is not
	// counted (under minimum_calls 4), 4 if it is (and the breaker opens).
	fs.SetBehaviour(fail)
	for range 3 {
		_, _ = c.StockReport(ctx, req)
	}
	atkWantBreaker(t, rt, atkStockReport, runtime.StateClosed, "breaker %v: the late failure of a call admitted before the breaker opened was counted")
}

// A request that does not marshal never reaches the dependency: half-open
// probes made of such requests must not close the breaker.
func TestAttackUnsendableProbesDoNotCloseTheBreaker(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	clk := newAtkClock()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clk)}},
		func(p *policy.Service) { p.Breaker.MinimumCalls = 4 })
	rt := c.Runtime()
	ctx := context.Background()
	for range 4 {
		_, _ = c.StockReport(ctx, &inventoryv1.StockReportRequest{})
	}
	if s, _ := rt.BreakerState(atkStockReport); s != runtime.StateOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	clk.Advance(2*time.Second + time.Millisecond)
	before := fs.Calls(atkStockReport)
	for range 3 {
		if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "\xff"}); err == nil {
			t.Fatal("a request that is not UTF-8 was sent")
		}
	}
	if got := fs.Calls(atkStockReport) - before; got != 0 {
		t.Fatalf("the server saw %d calls", got)
	}
	if s, _ := rt.BreakerState(atkStockReport); s == runtime.StateClosed {
		t.Errorf("breaker closed by 3 probes that never reached the dependency")
	}
}

// A server's negative pushback on a hedged copy stops further copies.
func TestAttackNegativePushbackStopsHedging(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, atkPushback("-1"))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		// A copy that fails with a non-fatal code makes the next one go at
		// once, whatever the delay: a delay far above the first answer's
		// round trip keeps the timer out of it, even on a loaded machine.
		m.Hedging = &policy.Hedging{Delay: 250 * time.Millisecond, MaxCopies: 4, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE", err)
	}
	time.Sleep(20 * time.Millisecond) // a further copy would arrive now
	if got := fs.Calls(atkGetStock); got != 1 {
		t.Errorf("the server saw %d copies after telling the client not to retry, want 1", got)
	}
}

// A burst of callers never puts more calls in flight than the bulkhead's
// permits; a cached key under a burst is fetched once.
func TestAttackBurstsStayWithinPermitsAndSingleFlight(t *testing.T) {
	atkNoLeak(t)
	// Each answer takes 30 ms; the timeouts (300 ms in the annotated
	// policy) are widened to 5 s, far above a loopback answer's time on a
	// loaded machine under -race (at load 20 every attempt of the cached
	// key was cut at 300 ms before it reached the server), and never
	// waited for: the relations under test are counts.
	fs, cc := startFault(t, server.Slow(30*time.Millisecond))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Bulkhead = &policy.Bulkhead{Permits: 4, MaxWait: 5 * time.Second}
		atkMethod(p, atkStockReport).Timeout = 5 * time.Second
	})
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 40 {
		wg.Go(func() {
			<-gate
			if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); err != nil {
				t.Errorf("StockReport: %v", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if got := fs.MaxInFlight(); got > 4 {
		t.Errorf("the server had %d calls in flight at once, want at most the 4 permits", got)
	}

	// The annotated cache, with a fresh time far above the burst's length
	// under load (a caller after a second would be answered stale and
	// refresh the key: a second fetch that is no single-flight failure).
	cached, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.RateLimit = nil
			m := atkMethod(p, atkGetStock)
			m.Timeout = 5 * time.Second
			m.Cache.FreshTTL = time.Minute
		})}})
	if err != nil {
		t.Fatal(err)
	}
	gate = make(chan struct{})
	for range 50 {
		wg.Go(func() {
			<-gate
			if r, err := cached.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "pear"}); err != nil || r.GetUnits() != 42 {
				t.Errorf("GetStock: %v, %v", r, err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if got := fs.Calls(atkGetStock); got != 1 {
		t.Errorf("50 callers of one key: the server saw %d calls, want 1", got)
	}
}

// An attempt cut by its own timeout, while the caller has time, says so.
func TestAttackOwnTimeoutMatchesErrAttemptTimeout(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Hang)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		atkMethod(p, atkStockReport).Timeout = 30 * time.Millisecond
	})
	begin := time.Now()
	_, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{})
	if !errors.Is(err, runtime.ErrAttemptTimeout) || status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("got %v, want ErrAttemptTimeout with DEADLINE_EXCEEDED", err)
	}
	// The server never answers: the bound is the timeout plus the scheduler
	// on a loaded machine (80 ms failed at load 20 by 50 µs).
	if took := time.Since(begin); took < 30*time.Millisecond || took > 330*time.Millisecond {
		t.Errorf("returned after %v, want about the 30ms timeout", took)
	}
}
