package runtime_test

// Attacks on today's hot-path rework (hot.go, admission's closedTicket,
// the bulkhead's fast path, the pooled trailer slots, Call skipping
// callUnary): through the generated inventory client against real
// loopback servers, counting what the server saw.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// todayIDs counts the attempts the server saw per value of the x-call
// metadata, and answers each UNAVAILABLE with the pushback the call asked
// for in x-push.
type todayIDs struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *todayIDs) behaviour(ctx context.Context, _ server.Call) error {
	md, _ := metadata.FromIncomingContext(ctx)
	id, push := first(md.Get("x-call")), first(md.Get("x-push"))
	c.mu.Lock()
	c.n[id]++
	c.mu.Unlock()
	if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, push)); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "injected, pushback "+push)
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// runPushbackMix makes 64 concurrent calls of GetStock, half told by the
// server not to retry (pushback -1), half told to retry at once (0), and
// returns the attempts the server saw per call. The connection is made
// first and each attempt has 3 s: at load 8, 64 calls under the annotated
// 300 ms timeout on a connection still dialling timed out before the
// server's answer, and a hedged copy told "-1" was followed by another
// before its answer came (the hedge delay is widened likewise).
func runPushbackMix(t *testing.T, edit func(m *policy.Method)) (map[string]int, map[string]string) {
	t.Helper()
	ids := &todayIDs{n: map[string]int{}}
	_, cc := startFault(t, ids.behaviour)
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1 << 20, Window: time.Minute}
		atkMethod(p, atkGetStock).Timeout = 3 * time.Second
		edit(atkMethod(p, atkGetStock))
	})
	const calls = 64
	push := map[string]string{}
	for i := range calls {
		push[strconv.Itoa(i)] = map[bool]string{true: "-1", false: "0"}[i%2 == 0]
	}
	var wg sync.WaitGroup
	for i := range calls {
		id := strconv.Itoa(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-call", id, "x-push", push[id])
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: id}); status.Code(err) != codes.Unavailable {
				t.Errorf("call %s: %v, want UNAVAILABLE", id, err)
			}
		}()
	}
	wg.Wait()
	return ids.n, push
}

// The pooled trailer slots are reused by concurrent calls: each call must
// read its own attempt's pushback. A call told "-1" is sent once; a call
// told "0" is retried to MaxAttempts.
func TestAttackTodayPushbackNoCrossTalkRetried(t *testing.T) {
	atkNoLeak(t)
	seen, push := runPushbackMix(t, func(m *policy.Method) {
		m.Retry.MaxAttempts = 3
		m.Retry.InitialBackoff = time.Millisecond
		m.Retry.MaxBackoff = time.Millisecond
	})
	for id, p := range push {
		want := map[string]int{"-1": 1, "0": 3}[p]
		if seen[id] != want {
			t.Errorf("call %s told pushback %s: server saw %d attempts, want %d", id, p, seen[id], want)
		}
	}
}

// The same for hedged copies, each in its own goroutine with its own slot:
// a copy told "-1" stops further copies, one told "0" sends the next now.
func TestAttackTodayPushbackNoCrossTalkHedged(t *testing.T) {
	atkNoLeak(t)
	seen, push := runPushbackMix(t, func(m *policy.Method) {
		m.Retry = nil
		m.Hedging = &policy.Hedging{Delay: time.Second, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	for id, p := range push {
		want := map[string]int{"-1": 1, "0": 3}[p]
		if seen[id] != want {
			t.Errorf("call %s told pushback %s: server saw %d copies, want %d", id, p, seen[id], want)
		}
	}
}

// A bulkhead never lets more than Permits calls reach the server, and a
// waiter is always handed a freed permit: with a MaxWait far longer than
// the calls, no call is refused, even while some callers cancel their
// wait and others barge in on the fast path.
func TestAttackTodayBulkheadBoundAndNoStrandedWaiter(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Slow(time.Millisecond))
	const permits = 3
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = &policy.Bulkhead{Permits: permits, MaxWait: 10 * time.Second}
		atkMethod(p, atkGetStock).Retry = nil
	})
	var wg sync.WaitGroup
	var ok, cancelled atomic.Int64
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				if (g+i)%7 == 0 {
					// Gives up while waiting: leave must not lose a handed permit.
					cancel()
					ctx, cancel = context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond)
				}
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"})
				cancel()
				switch code := status.Code(err); {
				case err == nil:
					ok.Add(1)
				case code == codes.DeadlineExceeded || code == codes.Canceled:
					cancelled.Add(1)
				default:
					t.Errorf("call: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if m := fs.MaxInFlight(); m > permits {
		t.Errorf("server saw %d calls at once, bulkhead allows %d", m, permits)
	}
	if ok.Load() == 0 {
		t.Fatal("no call succeeded")
	}
	// Every permit is free again: Permits calls held at once all get in.
	release := make(chan struct{})
	fs.SetBehaviour(atkHold(release))
	errs := make(chan error, permits)
	// Counted before the held calls start: one that reached the server
	// before the count was read would never be seen (it failed once so).
	before := fs.Calls(atkGetStock)
	for range permits {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "b"})
			errs <- err
		}()
	}
	atkWaitFor(t, "every permit taken by a held call", func() bool { return fs.Calls(atkGetStock)-before >= permits-0 })
	close(release)
	for range permits {
		if err := <-errs; err != nil {
			t.Errorf("held call: %v (a permit was lost)", err)
		}
	}
	t.Logf("%d ok, %d gave up", ok.Load(), cancelled.Load())
}

// A panic in the call (an interceptor) gives back the bulkhead's permit
// and the breaker's probe: after Permits panics, Permits calls still get
// in at once, and a half-open breaker whose probes panicked admits probes
// again.
func TestAttackTodayPanicReleasesPermitsAndProbes(t *testing.T) {
	atkNoLeak(t)
	fs, err := faultserver.Start(server.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	var panicking atomic.Bool
	cc, err := grpc.NewClient(fs.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if panicking.Load() {
				panic("interceptor panics")
			}
			return inv(ctx, method, req, reply, cc, opts...)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); fs.Stop() })
	clock := newAtkClock()
	const permits = 2
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}},
		func(p *policy.Service) {
			p.Bulkhead = &policy.Bulkhead{Permits: permits, MaxWait: time.Millisecond}
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Second, CoolDown: time.Second,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
			atkMethod(p, atkGetStock).Retry = nil
		})
	call := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panicked: %v", r)
			}
		}()
		_, err = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "p"})
		return err
	}
	panicking.Store(true)
	for range 3 * permits {
		if err := call(); err == nil || status.Code(err) == codes.ResourceExhausted {
			t.Fatalf("panicking call: %v, want the panic", err)
		}
	}
	panicking.Store(false)
	// Open the breaker with real failures, then let its one probe panic.
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	for range 2 {
		_ = call()
	}
	if err := call(); status.Code(err) != codes.Unavailable || fs.Calls(atkGetStock) != 2 {
		t.Fatalf("after 2 failures: %v and %d calls, want the breaker open", err, fs.Calls(atkGetStock))
	}
	clock.Advance(2 * time.Second)
	panicking.Store(true)
	if err := call(); err == nil || status.Code(err) == codes.Unavailable {
		t.Fatalf("panicking probe: %v, want the panic", err)
	}
	panicking.Store(false)
	fs.SetBehaviour(server.Healthy)
	if err := call(); err != nil {
		t.Fatalf("probe after a panicked probe: %v (the probe's place was not freed)", err)
	}
	if got := fs.Calls(atkGetStock); got != 3 {
		t.Fatalf("server saw %d calls, want 3", got)
	}
	// The permits all came back.
	release := make(chan struct{})
	fs.SetBehaviour(atkHold(release))
	errs := make(chan error, permits)
	for range permits {
		go func() { errs <- call() }()
	}
	atkWaitFor(t, "both permits taken", func() bool { return fs.Calls(atkGetStock) == 3+permits })
	close(release)
	for range permits {
		if err := <-errs; err != nil {
			t.Errorf("held call: %v", err)
		}
	}
}

// While half-open, exactly HalfOpenProbes attempts reach the server
// however many callers arrive at once; the rest are refused, not sent.
func TestAttackTodayHalfOpenProbesBoundedUnderLoad(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	clock := newAtkClock()
	const probes = 3
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}},
		func(p *policy.Service) {
			p.Bulkhead = nil
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 4, Window: time.Second, CoolDown: time.Second,
				HalfOpenProbes: probes, FailureCodes: policy.CodesOf(codes.Unavailable)}
			atkMethod(p, atkGetStock).Retry = nil
		})
	ctx := context.Background()
	for range 4 {
		_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "x"})
	}
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "x"}); fs.Calls(atkGetStock) != 4 || err == nil {
		t.Fatalf("breaker not open: %v, %d calls", err, fs.Calls(atkGetStock))
	}
	for round := range 5 {
		clock.Advance(2 * time.Second)
		release := make(chan struct{})
		hold := atkHold(release)
		fail := round < 4 // one probe fails: the breaker opens again
		fs.SetBehaviour(func(ctx context.Context, c server.Call) error {
			if err := hold(ctx, c); err != nil || !fail {
				return err
			}
			return status.Error(codes.Unavailable, "probe fails")
		})
		before := fs.Calls(atkGetStock)
		var wg sync.WaitGroup
		var refused atomic.Int64
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "x"})
				if err != nil {
					refused.Add(1)
				}
			}()
		}
		atkWaitFor(t, "the probes and refusals", func() bool {
			return fs.Calls(atkGetStock)-before == probes && refused.Load() == 32-probes
		})
		close(release)
		wg.Wait()
		if got := fs.Calls(atkGetStock) - before; got != probes {
			t.Fatalf("round %d: %d attempts reached the half-open server, want %d", round, got, probes)
		}
	}
	// The last round's probes succeeded: closed, every call goes through.
	fs.SetBehaviour(server.Healthy)
	before := fs.Calls(atkGetStock)
	for range 10 {
		if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "x"}); err != nil {
			t.Fatalf("closed breaker: %v", err)
		}
	}
	if fs.Calls(atkGetStock)-before != 10 {
		t.Fatal("closed breaker let fewer calls through")
	}
}

// A method with a fallback or a cache still gets it, whichever path Call
// takes, and its priority is sent on both paths.
func TestAttackTodayFallbackCacheAndPriority(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	prio := map[string][]string{}
	var failing atomic.Bool
	fs, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		prio[c.Method] = append(prio[c.Method], first(md.Get(runtime.PriorityHeader)))
		mu.Unlock()
		if failing.Load() {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	})
	var fellBack atomic.Int64
	withFallback := inventoryv1.InventoryServiceResilientOptions{
		StockReportFallback: func(ctx context.Context, req *inventoryv1.StockReportRequest, err error) (*inventoryv1.StockReportResponse, error) {
			fellBack.Add(1)
			return &inventoryv1.StockReportResponse{}, nil
		},
	}
	plain := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
	fb := atkInventory(t, cc, withFallback, nil)
	// The cache kept (atkInventory takes it out; this client keeps it).
	cached, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) { p.RateLimit = nil; p.Breaker = nil })}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []*inventoryv1.InventoryServiceResilientClient{plain, fb} {
		if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cached.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "c"}); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	if _, err := fb.StockReport(ctx, &inventoryv1.StockReportRequest{}); err != nil || fellBack.Load() != 1 {
		t.Errorf("fallback client: %v, %d fallbacks, want the fallback's answer", err, fellBack.Load())
	}
	if _, err := plain.StockReport(ctx, &inventoryv1.StockReportRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("plain client: %v, want UNAVAILABLE", err)
	}
	n := fs.Calls(atkGetStock)
	if _, err := cached.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "c"}); err != nil || fs.Calls(atkGetStock) != n {
		t.Errorf("cached GetStock: %v, server calls %d → %d, want the fresh cached answer", err, n, fs.Calls(atkGetStock))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range prio[atkStockReport] {
		if v != "low" {
			t.Errorf("StockReport sent priority %q, want low: %v", v, prio[atkStockReport])
			break
		}
	}
	for _, v := range prio[inventoryv1.InventoryService_ReserveStock_FullMethodName] {
		if v != "high" {
			t.Errorf("ReserveStock sent priority %q, want high", v)
			break
		}
	}
	if len(prio[atkStockReport]) != 4 {
		t.Errorf("StockReport reached the server %d times, want 4", len(prio[atkStockReport]))
	}
}

// The priority a caller set with WithPriority is never raised by the
// fast path nor by the fallback's path: a lowered one is sent as it is, a
// raised one is sent beside the method's own, lower, which the server
// takes.
func TestAttackTodayPriorityNeverRaised(t *testing.T) {
	atkNoLeak(t)
	var mu sync.Mutex
	var seen [][]string
	_, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen = append(seen, md.Get(runtime.PriorityHeader))
		mu.Unlock()
		return nil
	})
	fb := inventoryv1.InventoryServiceResilientOptions{
		StockReportFallback: func(context.Context, *inventoryv1.StockReportRequest, error) (*inventoryv1.StockReportResponse, error) {
			return nil, nil
		},
		ReserveStockFallback: func(context.Context, *inventoryv1.ReserveStockRequest, error) (*inventoryv1.ReserveStockResponse, error) {
			return nil, nil
		},
	}
	rank := map[string]int{"low": 1, "normal": 2, "high": 3, "critical": 4}
	lowest := func(vs []string) string {
		best := ""
		for _, v := range vs {
			if best == "" || rank[v] < rank[best] {
				best = v
			}
		}
		return best
	}
	for _, o := range []inventoryv1.InventoryServiceResilientOptions{{}, fb} {
		c := atkInventory(t, cc, o, nil)
		for _, tc := range []struct {
			name   string
			caller policy.Priority
			call   func(ctx context.Context) error
			want   string
		}{
			{"StockReport (low) raised to critical", policy.PriorityCritical, func(ctx context.Context) error {
				_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{})
				return err
			}, "low"},
			{"ReserveStock (high) lowered to low", policy.PriorityLow, func(ctx context.Context) error {
				_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o"})
				return err
			}, "low"},
			{"ReserveStock (high) raised to critical", policy.PriorityCritical, func(ctx context.Context) error {
				_, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o"})
				return err
			}, "high"},
		} {
			mu.Lock()
			seen = nil
			mu.Unlock()
			if err := tc.call(runtime.WithPriority(context.Background(), tc.caller)); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			mu.Lock()
			if len(seen) != 1 || lowest(seen[0]) != tc.want {
				t.Errorf("%s (fallback %v): server saw %v, want the lowest %s", tc.name, o.StockReportFallback != nil, seen, tc.want)
			}
			mu.Unlock()
		}
	}
}
