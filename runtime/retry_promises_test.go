package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// The promises of the client runtime under the faults it exists for
// (issue 12, items 6-11), each against a real loopback server that counts
// what it saw. README.md ("Semantics") states each one.

// pushbackMs answers UNAVAILABLE with the grpc-retry-pushback-ms trailer
// set to ms, written as the server wrote it (faultserver.Pushback takes a
// Duration, which cannot hold the values these tests send).
func pushbackMs(ms string) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, ms)); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected UNAVAILABLE, pushback "+ms+"ms")
	}
}

// counted is a GetStock fallback that counts its calls.
func counted(n *atomic.Int32) func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
	return func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
		n.Add(1)
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	}
}

// generous is a budget that never refuses in these tests.
var generous = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}

// cancelWhileWaiting starts call, waits until waiting (the client has the
// first attempt's answer) and a little more (so that the client is past
// the attempt and waiting), cancels, and returns the call's error and how
// long it took to return after the cancellation.
func cancelWhileWaiting(t *testing.T, waiting func() bool, call func(ctx context.Context) error) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	eventually(t, "the client had the first attempt's answer", waiting)
	time.Sleep(30 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the call ended before it was cancelled, with %v: it was not waiting", err)
	default:
	}
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		return err, time.Since(cancelled)
	case <-time.After(2 * time.Second):
		t.Fatal("the call did not end 2s after its cancellation")
		return nil, 0
	}
}

// canceledWhileWaiting calls GetStock through rt's first method on cc,
// with a fallback, cancels the call once srv has seen its first attempt
// (the call then waits, as during says), and asserts that it ends
// CANCELLED at once, without the fallback, after exactly one call reached
// srv (seen names them and says why one).
func canceledWhileWaiting(t *testing.T, srv *server.Server, cc grpc.ClientConnInterface, rt *runtime.Client, during, seen string) {
	t.Helper()
	plain := inventoryv1.NewInventoryServiceClient(cc)
	// answered counts the attempts whose answer the client has: the
	// cancellation comes after the first, so it finds the call waiting,
	// not an attempt still in flight on a loaded machine.
	var fb, answered atomic.Int32
	invoke := func(ctx context.Context, req *inventoryv1.GetStockRequest, opts ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
		defer answered.Add(1)
		return plain.GetStock(ctx, req, opts...)
	}
	waiting := func() bool { return srv.Calls(getStock) >= 1 && answered.Load() >= 1 }
	err, took := cancelWhileWaiting(t, waiting, func(ctx context.Context) error {
		_, err := runtime.Unary(ctx, rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "apple"}, nil, invoke, counted(&fb))
		return err
	})
	if status.Code(err) != codes.Canceled {
		t.Errorf("code = %v (%v), want CANCELLED: the caller cancelled %s", status.Code(err), err, during)
	}
	if took > 200*time.Millisecond {
		t.Errorf("returned %v after the cancellation, want at once", took)
	}
	if n := fb.Load(); n != 0 {
		t.Errorf("the fallback ran %d times for a cancelled call, want 0", n)
	}
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("server saw %d %s", got, seen)
	}
}

// --- 6. Cancellation stays Canceled everywhere ------------------------------

func TestCancellationStaysCanceledWhileWaitingForBackoff(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	// Full jitter over an hour: the wait drawn is minutes long but for a
	// chance of 1 in 100,000.
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Hour, MaxBackoff: time.Hour, Multiplier: 1,
		RetryableCodes: policy.CodesOf(codes.Unavailable)}
	rt := inventory(t, policy.Service{Budget: generous, Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: time.Second, Retry: retry}}})
	canceledWhileWaiting(t, srv, cc, rt, "during the backoff", "calls, want 1")
}

func TestCancellationStaysCanceledWhileWaitingForPushback(t *testing.T) {
	// 2^58 ms: a pushback that wrapped to no wait at all before it
	// saturated. The call has no deadline: it waits until cancelled.
	srv, cc := start(t, pushbackMs("288230376151711744"))
	rt := inventory(t, policy.Service{Budget: generous, Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: time.Second, Retry: retryPolicy(3)}}})
	canceledWhileWaiting(t, srv, cc, rt, "during the server's pushback", "calls, want 1: the pushback is waited for, not wrapped to a retry at once")
}

func TestCancellationStaysCanceledWhileAHedgeWaitsForItsNextCopy(t *testing.T) {
	// The first copy fails non-fatally with an hour's pushback: the hedge
	// waits for the time to send the next copy, with nothing in flight.
	// The hedge's delay (5 s) is far above the first answer's time on a
	// loaded machine (at load 20 a 100 ms delay sent the second copy
	// before the pushback came back) and far below the hour, and never
	// waited for: without the pushback the next copy would go at once.
	srv, cc := start(t, pushbackMs("3600000"))
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: 10 * time.Second, Hedging: hedging(5*time.Second, 3)}}})
	canceledWhileWaiting(t, srv, cc, rt, "while the hedge waited", "copies, want 1")
}

// --- 7. The cache never calls for callers who are gone ----------------------

// cachedStock builds a client whose GetStock caches per sku and retries
// with retry, behind bulkhead if not nil, and returns a function calling
// it.
func cachedStock(t *testing.T, cc grpc.ClientConnInterface, timeout time.Duration, retry *policy.Retry, bulkhead ...policy.Bulkhead) func(ctx context.Context, sku string) (*inventoryv1.GetStockResponse, error) {
	t.Helper()
	svc := policy.Service{Budget: generous, Methods: []policy.Method{{
		Name: getStock, Idempotent: true, Timeout: timeout, Retry: retry,
		Cache: &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"sku"}},
	}}}
	if len(bulkhead) > 0 {
		svc.Bulkhead = &bulkhead[0]
	}
	rt := inventory(t, svc)
	plain := inventoryv1.NewInventoryServiceClient(cc)
	key := func(r *inventoryv1.GetStockRequest) string { return r.GetSku() }
	return func(ctx context.Context, sku string) (*inventoryv1.GetStockResponse, error) {
		return runtime.UnaryCached(ctx, rt.Method(0), "", key, &inventoryv1.GetStockRequest{Sku: sku}, nil, plain.GetStock, nil)
	}
}

func TestCacheStartsNoCallForACallerAlreadyGone(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	get := cachedStock(t, cc, time.Second, nil)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := get(cancelled, "apple"); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled caller: code = %v (%v), want CANCELLED", status.Code(err), err)
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel2()
	if _, err := get(expired, "pear"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("caller past its deadline: code = %v (%v), want DEADLINE_EXCEEDED", status.Code(err), err)
	}
	time.Sleep(100 * time.Millisecond) // a shared call started regardless would have arrived by now
	if got := srv.Calls(getStock); got != 0 {
		t.Errorf("server saw %d calls for callers already gone, want 0", got)
	}
	// The key was not poisoned: a live caller is answered.
	if resp, err := get(context.Background(), "apple"); err != nil || resp.GetUnits() != 42 {
		t.Fatalf("live caller: %v %v, want 42 units", resp, err)
	}
}

func TestCacheStartsNothingMoreWhenItsLastWaiterLeaves(t *testing.T) {
	t.Run("waiting for the server's pushback", func(t *testing.T) {
		// The first attempt is told to come back in 200ms; the caller
		// gives up at 50ms. No retry may follow for nobody.
		srv, cc := start(t, faultserver.PerCall(pushbackMs("200"), server.Healthy))
		get := cachedStock(t, cc, time.Second, retryPolicy(3))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := get(ctx, "apple"); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("code = %v (%v), want the caller's DEADLINE_EXCEEDED", status.Code(err), err)
		}
		time.Sleep(400 * time.Millisecond) // past the pushback: a retry would have arrived
		if got := srv.Calls(getStock); got != 1 {
			t.Errorf("server saw %d calls, want 1: the retry had no caller left", got)
		}
	})
	t.Run("waiting for a bulkhead permit", func(t *testing.T) {
		// The only permit is held by another key's call for 300ms; the
		// shared call for apple waits for it, and its caller leaves at
		// 50ms. When the permit comes free, nobody is left to call for.
		srv, cc := start(t, server.Slow(300*time.Millisecond))
		get := cachedStock(t, cc, time.Second, nil, policy.Bulkhead{Permits: 1, MaxWait: time.Second})
		pear := make(chan error, 1)
		go func() {
			_, err := get(context.Background(), "pear")
			pear <- err
		}()
		eventually(t, "server saw the call holding the permit", func() bool { return srv.Calls(getStock) == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := get(ctx, "apple"); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("code = %v (%v), want the caller's DEADLINE_EXCEEDED", status.Code(err), err)
		}
		if err := <-pear; err != nil {
			t.Fatalf("the call holding the permit: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // a shared call still waiting would have been let through by now
		if got := srv.Calls(getStock); got != 1 {
			t.Errorf("server saw %d calls, want 1: the call waiting for the permit had no caller left", got)
		}
	})
}

func TestCacheLetsAnAttemptOnTheWireFinishForTheNextCaller(t *testing.T) {
	// The caller gives up at 50ms; the attempt already sent is let answer
	// at 200ms, and its answer serves the next caller without a call.
	srv, cc := start(t, server.Slow(200*time.Millisecond))
	get := cachedStock(t, cc, 2*time.Second, retryPolicy(3))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := get(ctx, "apple"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("code = %v (%v), want the caller's DEADLINE_EXCEEDED", status.Code(err), err)
	}
	time.Sleep(300 * time.Millisecond) // the attempt answered meanwhile
	if resp, err := get(context.Background(), "apple"); err != nil || resp.GetUnits() != 42 {
		t.Fatalf("next caller: %v %v, want 42 units", resp, err)
	}
	if got, cut := srv.Calls(getStock), srv.Cancelled(getStock); got != 1 || cut != 0 {
		t.Errorf("server saw %d calls, %d cancelled; want 1 call, not cut, whose answer the next caller got", got, cut)
	}
}

// TestCacheKeepsTheSharedCallWhileAWaiterRemains: a caller of 400 ms
// starts the shared call of a key (900 ms); a second caller joins it while
// the first is still there and outlives it: the shared call goes on for
// the one left and is never cut. (With 100 ms and 300 ms, at load 19 the
// first caller had gone before the second joined: two calls.)
func TestCacheKeepsTheSharedCallWhileAWaiterRemains(t *testing.T) {
	srv, cc := start(t, server.Slow(900*time.Millisecond))
	readyConn(t, cc)
	get := cachedStock(t, cc, 2*time.Second, nil)
	impatient, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := get(impatient, "apple")
		first <- err
	}()
	eventually(t, "server saw the shared call", func() bool { return srv.Calls(getStock) == 1 })
	resp, err := get(context.Background(), "apple") // joins the flight, then outlives the first caller
	if err != nil || resp.GetUnits() != 42 {
		t.Fatalf("patient caller: %v %v, want 42 units from the shared call", resp, err)
	}
	if err := <-first; status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("impatient caller: code = %v (%v), want DEADLINE_EXCEEDED", status.Code(err), err)
	}
	if got, cut := srv.Calls(getStock), srv.Cancelled(getStock); got != 1 || cut != 0 {
		t.Errorf("server saw %d calls, %d cancelled; want 1 call, never cut while a caller waited", got, cut)
	}
}

// --- 8. An unset integer key is no key --------------------------------------

// Generated code reads an integer idempotency key field with
// runtime.KeyFromInt or KeyFromUint (see the plugin's golden
// idempotency_key_resilient.pb.go.golden); proto3 gives 0 for a field left
// unset.

func TestUnsetIntegerKeyIsNoKey(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	rt := inventory(t, policy.Service{Budget: generous, Methods: []policy.Method{
		{Name: reserveStock, IdempotencyKey: "order_id", Retry: retryPolicy(3)}}})
	plain := inventoryv1.NewInventoryServiceClient(cc)
	req := &inventoryv1.ReserveStockRequest{OrderId: "A", Sku: "apple", Units: 1}
	for _, k := range []string{runtime.KeyFromInt(0), runtime.KeyFromUint(0)} {
		if _, err := runtime.Unary(context.Background(), rt.Method(0), k, req, nil, plain.ReserveStock, nil); status.Code(err) != codes.Unavailable {
			t.Fatalf("code = %v (%v), want UNAVAILABLE", status.Code(err), err)
		}
	}
	if got := srv.Calls(reserveStock); got != 2 {
		t.Errorf("server saw %d calls for 2 calls keyed 0, want 2: a call without a key is never retried", got)
	}
	if keys := srv.Keys(reserveStock); len(keys) != 0 {
		t.Errorf("server received keys %q, want none: 0 is no key", keys)
	}
	// A real integer key still allows the retries, the same on each.
	_, _ = runtime.Unary(context.Background(), rt.Method(0), runtime.KeyFromInt(-7), req, nil, plain.ReserveStock, nil)
	if keys := srv.Keys(reserveStock); len(keys) != 3 || keys[0] != "-7" || keys[2] != "-7" {
		t.Errorf("keys = %q, want -7 on each of 3 attempts", keys)
	}
}

func TestUnsetIntegerKeyIsNotDeduplicated(t *testing.T) {
	g, err := server.NewGuard() // ReserveStock deduplicated on the memory store
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start("127.0.0.1:0", server.Healthy, g.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	rt := inventory(t, policy.Service{Methods: []policy.Method{
		{Name: reserveStock, IdempotencyKey: "order_id", Retry: retryPolicy(3)}}})
	plain := inventoryv1.NewInventoryServiceClient(cc)
	reserve := func(order, key string) string {
		t.Helper()
		resp, err := runtime.Unary(context.Background(), rt.Method(0), key,
			&inventoryv1.ReserveStockRequest{OrderId: order, Sku: "apple", Units: 1}, nil, plain.ReserveStock, nil)
		if err != nil {
			t.Fatalf("order %s: %v", order, err)
		}
		return resp.GetReservationId()
	}
	// Two different orders whose integer key was left unset: each is run.
	if a, b := reserve("A", runtime.KeyFromInt(0)), reserve("B", runtime.KeyFromInt(0)); a != "r-A" || b != "r-B" {
		t.Errorf("reservations %q and %q, want r-A and r-B: two orders without a key are two orders", a, b)
	}
	if got := srv.Calls(reserveStock); got != 2 {
		t.Errorf("the handler ran %d times, want 2", got)
	}
	// The Guard still deduplicates a real key: the repeat is not run again.
	if a, b := reserve("C", runtime.KeyFromInt(9)), reserve("C", runtime.KeyFromInt(9)); a != "r-C" || b != "r-C" {
		t.Errorf("reservations %q and %q, want r-C twice", a, b)
	}
	if got := srv.Calls(reserveStock); got != 3 {
		t.Errorf("the handler ran %d times, want 3: the repeat of key 9 is answered from the store", got)
	}
}

// --- 9. Only the attempt's own timeout makes DEADLINE_EXCEEDED retryable ----

func TestOnlyTheAttemptsOwnTimeoutMakesDeadlineExceededRetryable(t *testing.T) {
	retry := retryPolicy(3)
	retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
	withTimeout := func(timeout time.Duration) policy.Service {
		return policy.Service{Budget: generous, Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Timeout: timeout, Retry: retry}}}
	}
	t.Run("returned by the server", func(t *testing.T) {
		srv, cc := start(t, server.Fail(codes.DeadlineExceeded))
		_, err := callGetStock(context.Background(), inventory(t, withTimeout(time.Second)), cc)
		if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrAttemptTimeout) {
			t.Errorf("err = %v, want the server's DEADLINE_EXCEEDED, not a per-attempt timeout", err)
		}
		if got := srv.Calls(getStock); got != 1 {
			t.Errorf("server saw %d calls, want 1: the server's own DEADLINE_EXCEEDED is not retried", got)
		}
	})
	t.Run("the attempt's own timeout", func(t *testing.T) {
		// 150 ms, on a connection made beforehand: each attempt reaches
		// the hung server before it is cut, on a loaded machine too (with
		// 50 ms, the server once saw only the first).
		srv, cc := start(t, server.Hang)
		readyConn(t, cc)
		_, err := callGetStock(context.Background(), inventory(t, withTimeout(150*time.Millisecond)), cc)
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, runtime.ErrAttemptTimeout) || !errors.Is(err, runtime.ErrRetriesExhausted) {
			t.Errorf("err = %v, want DEADLINE_EXCEEDED matching ErrAttemptTimeout and ErrRetriesExhausted", err)
		}
		if got := srv.Calls(getStock); got != 3 {
			t.Errorf("server saw %d calls, want 3: a per-attempt timeout is retried when listed", got)
		}
	})
	t.Run("the caller's deadline", func(t *testing.T) {
		srv, cc := start(t, server.Hang)
		readyConn(t, cc) // so that the one call reaches the server in its 300 ms
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := callGetStock(ctx, inventory(t, withTimeout(time.Second)), cc)
		if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrAttemptTimeout) {
			t.Errorf("err = %v, want the caller's own DEADLINE_EXCEEDED, not a per-attempt timeout", err)
		}
		if got := srv.Calls(getStock); got != 1 {
			t.Errorf("server saw %d calls, want 1", got)
		}
	})
	t.Run("a hedged copy's own timeout", func(t *testing.T) {
		// Both copies hang; each is cut by its own 200ms timeout, which
		// is non-fatal when listed: the hedge waits for the second copy.
		srv, cc := start(t, server.Hang)
		readyConn(t, cc) // each copy reaches the server before its 200 ms
		h := hedging(100*time.Millisecond, 2)
		h.NonFatalCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
		rt := inventory(t, policy.Service{Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Timeout: 200 * time.Millisecond, Hedging: h}}})
		begin := time.Now()
		_, err := callGetStock(context.Background(), rt, cc)
		if !errors.Is(err, runtime.ErrAttemptTimeout) || !errors.Is(err, runtime.ErrRetriesExhausted) {
			t.Errorf("err = %v, want ErrAttemptTimeout and ErrRetriesExhausted", err)
		}
		if took := time.Since(begin); took < 300*time.Millisecond {
			t.Errorf("took %v, want the second copy waited for (100ms + 200ms)", took)
		}
		if got := srv.Calls(getStock); got != 2 {
			t.Errorf("server saw %d copies, want 2", got)
		}
	})
	t.Run("a hedged copy", func(t *testing.T) {
		srv, cc := start(t, server.Fail(codes.DeadlineExceeded))
		h := hedging(100*time.Millisecond, 3)
		h.NonFatalCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
		rt := inventory(t, policy.Service{Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Timeout: time.Second, Hedging: h}}})
		_, err := callGetStock(context.Background(), rt, cc)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("err = %v, want DEADLINE_EXCEEDED", err)
		}
		if got := srv.Calls(getStock); got != 1 {
			t.Errorf("server saw %d copies, want 1: the server's DEADLINE_EXCEEDED ends the hedge", got)
		}
	})
}

// --- 10. Arithmetic saturates -----------------------------------------------

func TestPushbackSaturates(t *testing.T) {
	for _, ms := range []string{"288230376151711744", "9223372036854775807", "99999999999999999999"} {
		d, ok := runtime.Pushback(nil, metadata.Pairs(runtime.PushbackHeader, ms))
		if !ok || d != math.MaxInt64 {
			t.Errorf("Pushback(%s ms) = %v, %v; want the longest Duration, true", ms, d, ok)
		}
	}
	for _, tc := range []struct{ name, ms string }{
		{"2^58 ms", "288230376151711744"},
		{"beyond int64", "99999999999999999999"},
		{"2s, past the 500ms deadline", "2000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cc := start(t, pushbackMs(tc.ms))
			rt := inventory(t, policy.Service{Budget: generous, Methods: []policy.Method{
				{Name: getStock, Idempotent: true, Timeout: time.Second, Retry: retryPolicy(3)}}})
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			begin := time.Now()
			_, err := callGetStock(ctx, rt, cc)
			if took := time.Since(begin); took > 250*time.Millisecond {
				t.Errorf("took %v, want the retries ended at once", took)
			}
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "injected") {
				t.Errorf("err = %v, want the server's last UNAVAILABLE", err)
			}
			if got := srv.Calls(getStock); got != 1 {
				t.Errorf("server saw %d calls, want 1: a pushback longer than the time left ends the retries", got)
			}
		})
	}
}

func TestCoolDownSaturates(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	clock := newFakeClock()
	br := breakerPolicy(2, 1)
	br.CoolDown = math.MaxInt64 // the longest a policy can say
	rt := inventory(t, policy.Service{Breaker: br}, runtime.WithClock(clock))
	clock.Advance(time.Second) // a reading after the client's base: the sum would wrap
	for range 2 {
		_, _ = callGetStock(context.Background(), rt, cc)
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v after 2 failures, want open", s)
	}
	clock.Advance(100 * 365 * 24 * time.Hour)
	if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Errorf("err = %v, want ErrCircuitOpen: the cool-down has not elapsed", err)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d calls, want 2: no half-open probe before the cool-down", got)
	}
}

// --- 11. Errors and logs explain themselves ----------------------------------

func TestAttemptTimeoutErrorNamesDependencyMethodAttemptAndTimeout(t *testing.T) {
	_, cc := start(t, server.Hang)
	retry := retryPolicy(2)
	retry.RetryableCodes = policy.CodesOf(codes.DeadlineExceeded)
	for _, tc := range []struct {
		name    string
		retry   *policy.Retry
		attempt string
	}{{"one attempt", nil, "attempt 1 "}, {"the last of two", retry, "attempt 2 "}} {
		t.Run(tc.name, func(t *testing.T) {
			rt := inventory(t, policy.Service{Budget: generous, Methods: []policy.Method{
				{Name: getStock, Idempotent: true, Timeout: 80 * time.Millisecond, Retry: tc.retry}}})
			_, err := callGetStock(context.Background(), rt, cc)
			if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, runtime.ErrAttemptTimeout) {
				t.Fatalf("err = %v, want DEADLINE_EXCEEDED matching ErrAttemptTimeout", err)
			}
			msg := status.Convert(err).Message()
			for _, want := range []string{"example.inventory.v1.InventoryService ", getStock, tc.attempt, "per-attempt timeout of 80ms"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
		})
	}
	t.Run("a cache's shared call", func(t *testing.T) {
		// A call of one attempt: the attempt's own timeout cuts it, and
		// says so as it does without the cache.
		get := cachedStock(t, cc, 80*time.Millisecond, nil)
		_, err := get(context.Background(), "apple")
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, runtime.ErrAttemptTimeout) {
			t.Fatalf("err = %v, want DEADLINE_EXCEEDED matching ErrAttemptTimeout", err)
		}
		msg := status.Convert(err).Message()
		for _, want := range []string{"example.inventory.v1.InventoryService ", getStock, "attempt 1 ", "per-attempt timeout of 80ms"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
	})
}

func TestBudgetExhaustionLoggedOnceWhenItBeginsAndOnceWhenItEnds(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	clock := newFakeClock()
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	seen := &events{}
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Microsecond, MaxBackoff: time.Microsecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	rt := inventory(t, policy.Service{
		Budget:  &policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second},
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retry}},
	}, runtime.WithClock(clock), runtime.WithLogger(logger), runtime.WithObserver(seen.Observe))
	// 300 calls over 2 s of the fake clock, all failing: the budget lets
	// a retry through now and then (10 % of the requests) and refuses the
	// rest, one episode throughout.
	for range 300 {
		_, _ = callGetStock(context.Background(), rt, cc)
		clock.Advance(2 * time.Second / 300)
	}
	count := func(s string) int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(buf.String(), s)
	}
	if n := count(`level=WARN msg="retry budget exhausted`); n != 1 {
		t.Errorf("%d budget-exhausted warnings for one episode, want 1:\n%s", n, buf.String())
	}
	// The dependency recovers; the episode ends at the first call after a
	// whole window without a refusal, once.
	srv.SetBehaviour(server.Healthy)
	_, _ = callGetStock(context.Background(), rt, cc)
	if n := count("retry budget available again"); n != 0 {
		t.Errorf("the episode ended while the window still held refusals")
	}
	clock.Advance(10 * time.Second)
	for range 3 {
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(`level=INFO msg="retry budget available again"`); n != 1 {
		t.Errorf("%d end-of-exhaustion lines, want 1 (info):\n%s", n, buf.String())
	}
	got := seen.list()
	if len(got) != 2 || got[0] != "budget exhausted unavailable" || !strings.HasPrefix(got[1], "budget recovered no retry refused for 10s;") {
		t.Errorf("events = %q, want one exhaustion and one recovery", got)
	}
	// A new outage is a new episode.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	for range 40 {
		_, _ = callGetStock(context.Background(), rt, cc)
	}
	if n := count(`level=WARN msg="retry budget exhausted`); n != 2 {
		t.Errorf("%d budget-exhausted warnings after a second outage, want 2", n)
	}
}

func TestLogsAndMetricsNameTheMethodAlike(t *testing.T) {
	_, cc := start(t, server.Fail(codes.Unavailable))
	var buf bytes.Buffer
	var mu sync.Mutex
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1)},
		runtime.WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))), runtime.WithRegisterer(reg))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	var fb atomic.Int32
	for range 3 {
		_, _ = runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, counted(&fb))
	}
	wantMetric(t, reg, 1, "resilient_client_fallbacks_total", "method", "GetStock", "cause", "circuit_open")
	mu.Lock()
	logged := buf.String()
	mu.Unlock()
	if !strings.Contains(logged, `msg="fallback answering instead of the dependency" dependency=example.inventory.v1.InventoryService method=GetStock `) {
		t.Errorf("the fallback's log line does not name the method as the metric does (method=GetStock):\n%s", logged)
	}
	if strings.Contains(logged, "method=/") {
		t.Errorf("a log line names the method by its full name:\n%s", logged)
	}
}
