package runtime_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// These tests prove the promises of the README's "Semantics" section that
// no other test of the package proved on its own, each against a fault
// server on loopback and its counts. The table at the end of that section
// names the test of every promise.

// TestACallHoldsOnePermitAndOneTokenForAllItsAttempts: a call takes one
// bulkhead permit and one rate-limit token, and keeps them for its retries
// and its hedged copies; it takes no second one for them.
func TestACallHoldsOnePermitAndOneTokenForAllItsAttempts(t *testing.T) {
	t.Run("the permit is held through the wait between attempts", func(t *testing.T) {
		fs, cc := startFault(t, faultserver.Pushback(codes.Unavailable, 150*time.Millisecond))
		rt := inventory(t, policy.Service{
			Budget:   generous,
			Bulkhead: &policy.Bulkhead{Permits: 1},
			Methods:  []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second, Retry: retryPolicy(3)}},
		})
		done := make(chan error, 1)
		go func() {
			_, err := callGetStock(context.Background(), rt, cc)
			done <- err
		}()
		atkWaitFor(t, "the first attempt reached the server", func() bool { return fs.Calls(getStock) >= 1 })
		// The call now waits 150ms for its second attempt: its permit is
		// still its own, so another call finds the bulkhead full.
		if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrBulkheadFull) {
			t.Errorf("second call during the first one's pushback: %v, want ErrBulkheadFull", err)
		}
		if err := <-done; status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrRetriesExhausted) {
			t.Fatalf("first call: %v, want UNAVAILABLE after its 3 attempts", err)
		}
		if got := fs.Calls(getStock); got != 3 {
			t.Errorf("server saw %d calls, want 3: the first call's attempts, none of the refused one", got)
		}
	})

	t.Run("one token pays for every attempt", func(t *testing.T) {
		fs, cc := startFault(t, server.Fail(codes.Unavailable))
		rt := inventory(t, policy.Service{
			Budget:    generous,
			RateLimit: &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1},
			Methods:   []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second, Retry: retryPolicy(3)}},
		})
		if _, err := callGetStock(context.Background(), rt, cc); status.Code(err) != codes.Unavailable {
			t.Fatalf("first call: %v, want UNAVAILABLE", err)
		}
		if got := fs.Calls(getStock); got != 3 {
			t.Fatalf("server saw %d calls, want 3 attempts on the one token of a burst of 1", got)
		}
		if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrRateLimited) {
			t.Errorf("second call: %v, want ErrRateLimited: the burst's one token is spent", err)
		}
		if got := fs.Calls(getStock); got != 3 {
			t.Errorf("server saw %d calls, want still 3", got)
		}
	})

	t.Run("one permit and one token for every hedged copy", func(t *testing.T) {
		fs, cc := startFault(t, server.Hang)
		rt := inventory(t, policy.Service{
			Budget:    generous,
			Bulkhead:  &policy.Bulkhead{Permits: 1},
			RateLimit: &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1},
			Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: 150 * time.Millisecond,
				Hedging: &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}}},
		})
		_, err := callGetStock(context.Background(), rt, cc)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("hedged call against a hung server: %v, want DEADLINE_EXCEEDED", err)
		}
		if got := fs.Calls(getStock); got != 3 {
			t.Errorf("server saw %d copies, want 3 under one permit and one token", got)
		}
	})
}

// TestAnAttemptEndedByTheCallersDeadlineIsAFailure: the caller's deadline
// (not a cancellation) ending an attempt counts as a failure of the
// dependency, which did not answer in the time it had; it is gRPC's plain
// DEADLINE_EXCEEDED, not ErrAttemptTimeout.
func TestAnAttemptEndedByTheCallersDeadlineIsAFailure(t *testing.T) {
	fs, cc := startFault(t, server.Hang)
	rt := inventory(t, policy.Service{
		Breaker: breakerPolicy(3, 1),
		Methods: []policy.Method{{Name: getStock, Idempotent: true}},
	})
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := callGetStock(ctx, rt, cc)
		cancel()
		if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrAttemptTimeout) {
			t.Fatalf("call %d: %v, want the plain DEADLINE_EXCEEDED of the caller's deadline", i, err)
		}
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v after 3 attempts ended by the caller's deadline, want open", s)
	}
	if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Errorf("next call: %v, want ErrCircuitOpen", err)
	}
	// At most 3: none retried, and the open breaker sent nothing. Fewer
	// when a loaded machine let a deadline pass before its call reached
	// the server, which the breaker counts all the same.
	if got := fs.Calls(getStock); got > 3 || got < 1 {
		t.Errorf("server saw %d calls, want 1 to 3", got)
	}
}

// TestABreakerIsSharedByTheServiceUnlessPerMethod: one breaker per
// dependency, so one method's failures refuse another's calls; a method
// with a breaker of its own (per_method) neither shares nor spreads them.
func TestABreakerIsSharedByTheServiceUnlessPerMethod(t *testing.T) {
	for _, perMethod := range []bool{false, true} {
		name := map[bool]string{false: "shared", true: "per method"}[perMethod]
		t.Run(name, func(t *testing.T) {
			fs, cc := startFault(t, server.Fail(codes.Unavailable))
			get := policy.Method{Name: getStock, Idempotent: true}
			if perMethod {
				get.Breaker = breakerPolicy(3, 1)
			}
			rt := inventory(t, policy.Service{
				Breaker: breakerPolicy(3, 1),
				Methods: []policy.Method{get, {Name: reserveStock, Idempotent: true}},
			})
			for range 3 {
				if _, err := callGetStock(context.Background(), rt, cc); status.Code(err) != codes.Unavailable {
					t.Fatalf("GetStock: %v, want UNAVAILABLE", err)
				}
			}
			if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
				t.Fatalf("GetStock's breaker %v, want open", s)
			}
			plain := inventoryv1.NewInventoryServiceClient(cc)
			_, err := runtime.Unary(context.Background(), rt.Method(1), "", &inventoryv1.ReserveStockRequest{OrderId: "o", Sku: "a", Units: 1},
				nil, plain.ReserveStock, nil)
			calls := fs.Calls(reserveStock)
			if perMethod {
				if errors.Is(err, runtime.ErrCircuitOpen) || status.Code(err) != codes.Unavailable || calls != 1 {
					t.Errorf("ReserveStock: %v, server saw %d; want the dependency's UNAVAILABLE from 1 call: GetStock's breaker is its own", err, calls)
				}
				if s, _ := rt.BreakerState(reserveStock); s != runtime.StateClosed {
					t.Errorf("ReserveStock's breaker %v, want closed", s)
				}
			} else if !errors.Is(err, runtime.ErrCircuitOpen) || calls != 0 {
				t.Errorf("ReserveStock: %v, server saw %d; want ErrCircuitOpen and no call: the breaker is the service's", err, calls)
			}
		})
	}
}

// TestStreamsAreNotRateLimitedAndNeverRetried: opening a stream takes no
// rate-limit token, and a stream that fails is not opened again.
func TestStreamsAreNotRateLimitedAndNeverRetried(t *testing.T) {
	fs, cc := startFault(t, server.Healthy)
	rt := inventory(t, policy.Service{
		Budget:    generous,
		RateLimit: &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1},
		Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Timeout: time.Second},
			{Name: watchStock, Kind: policy.KindServerStreaming, Timeout: time.Second},
		},
	})
	client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatalf("first unary call: %v", err)
	}
	if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrRateLimited) {
		t.Fatalf("second unary call: %v, want ErrRateLimited: the burst's token is spent", err)
	}
	recvAll := func() error {
		st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			return err
		}
		for {
			if _, err := st.Recv(); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
	for i := range 3 {
		if err := recvAll(); err != nil {
			t.Fatalf("stream %d with no token left: %v, want it read to its end", i, err)
		}
	}
	if got := fs.Calls(watchStock); got != 3 {
		t.Fatalf("server saw %d streams, want 3: streams take no token", got)
	}
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	if err := recvAll(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream against a failing server: %v, want UNAVAILABLE", err)
	}
	if got := fs.Calls(watchStock); got != 4 {
		t.Errorf("server saw %d streams, want 4: a failed stream is not opened again", got)
	}

	// A policy that asks for a stream's retries is refused outright.
	_, err := runtime.NewClient(&policy.Service{Name: "example.inventory.v1.InventoryService", Methods: []policy.Method{
		{Name: watchStock, Kind: policy.KindServerStreaming, Idempotent: true, Retry: retryPolicy(3)}}})
	if err == nil || !strings.Contains(err.Error(), "Retry") {
		t.Errorf("retry on a stream: %v, want a refusal naming Retry", err)
	}
}

// TestOnlyIdempotentUnaryMethodsHedgeAndNeverAlsoRetry: the constructor
// refuses hedging on a method that is not idempotent, on a stream, and on
// a method that also retries, naming the field.
func TestOnlyIdempotentUnaryMethodsHedgeAndNeverAlsoRetry(t *testing.T) {
	h := &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	for _, c := range []struct {
		name string
		m    policy.Method
	}{
		{"not idempotent", policy.Method{Name: reserveStock, IdempotencyKey: "order_id", Timeout: time.Second, Hedging: h}},
		{"a stream", policy.Method{Name: watchStock, Kind: policy.KindServerStreaming, Idempotent: true, Timeout: time.Second, Hedging: h}},
		{"also retries", policy.Method{Name: getStock, Idempotent: true, Timeout: time.Second, Hedging: h, Retry: retryPolicy(3)}},
	} {
		_, err := runtime.NewClient(&policy.Service{Name: "example.inventory.v1.InventoryService", Methods: []policy.Method{c.m}})
		if err == nil || !strings.Contains(err.Error(), "Hedging") {
			t.Errorf("%s: %v, want a refusal naming Hedging", c.name, err)
		}
	}
	// The same hedge on an idempotent unary method without retries is taken.
	if _, err := runtime.NewClient(&policy.Service{Name: "example.inventory.v1.InventoryService", Methods: []policy.Method{
		{Name: getStock, Idempotent: true, Timeout: time.Second, Hedging: h}}}); err != nil {
		t.Errorf("hedging an idempotent unary method: %v", err)
	}
}

// TestTheFallbackSeesTheFinalErrorAfterTheStaleCache: a failed call is
// answered by a stale cached value first; the fallback runs only for a key
// with none, and then receives the request and the final error.
func TestTheFallbackSeesTheFinalErrorAfterTheStaleCache(t *testing.T) {
	fs, cc := startFault(t, server.Healthy)
	clock := newFakeClock()
	rt := cachedInventory(t, &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Minute, MaxEntries: 10}, nil, runtime.WithClock(clock))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	var fallbackSaw []string
	fallback := func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
		fallbackSaw = append(fallbackSaw, req.GetSku()+":"+status.Code(err).String())
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	}
	get := func(sku string) (*inventoryv1.GetStockResponse, error) {
		return runtime.UnaryCached(context.Background(), rt.Method(0), "", skuKey, &inventoryv1.GetStockRequest{Sku: sku}, nil, plain.GetStock, fallback)
	}
	if resp, err := get("apple"); err != nil || resp.GetUnits() != 42 {
		t.Fatalf("%v %v, want the server's 42", resp, err)
	}
	clock.Advance(2 * time.Second) // no longer fresh, still within stale_ttl
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	if resp, err := get("apple"); err != nil || resp.GetUnits() != 42 {
		t.Errorf("apple: %v %v, want the stale 42, not the fallback's -1", resp, err)
	}
	if resp, err := get("pear"); err != nil || resp.GetUnits() != -1 {
		t.Errorf("pear: %v %v, want the fallback's -1: no stale value is kept for it", resp, err)
	}
	if len(fallbackSaw) != 1 || fallbackSaw[0] != "pear:Unavailable" {
		t.Errorf("fallback saw %q, want only pear with the final UNAVAILABLE", fallbackSaw)
	}
	if got := fs.Calls(getStock); got != 3 {
		t.Errorf("server saw %d calls, want 3: the fresh one, then one per failed key", got)
	}
}

// TestATokenIsGivenBackWhenTheContextEndsItsWait: a call whose context ends
// while it waits for a rate-limit token cancels its reservation, so the
// next caller waits for the next token, not for the one after it.
func TestATokenIsGivenBackWhenTheContextEndsItsWait(t *testing.T) {
	fs, cc := startFault(t, server.Healthy)
	rt := inventory(t, policy.Service{
		RateLimit: &policy.RateLimit{RequestsPerSecond: 4, Burst: 1, MaxWait: time.Second},
		Methods:   []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second}},
	})
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatal(err)
	}
	// The bucket is empty; a token comes every 250ms.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, err := callGetStock(ctx, rt, cc); status.Code(err) != codes.Canceled {
		t.Fatalf("waiting for a token: %v, want CANCELLED", err)
	}
	begin := time.Now()
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatal(err)
	}
	// Its own token comes about 240ms on; had the cancelled wait kept its
	// reservation, it would come about 490ms on.
	if took := time.Since(begin); took > 400*time.Millisecond {
		t.Errorf("the next call waited %v, want the next token (~240ms): the cancelled wait kept its token", took)
	}
	if got := fs.Calls(getStock); got != 2 {
		t.Errorf("server saw %d calls, want 2", got)
	}
}

// TestATokenIsGivenBackWhenTheContextEndsWaitingForAPermit: the rate
// limit comes before the bulkhead, and is on the calls the client sends:
// a call that took its token and then ran out of time waiting for a
// permit was not sent, and its token goes back (before, it was spent, and
// the third call here was refused by the rate limit with the bucket's
// two tokens spent on one call sent). TestABulkheadRefusalGivesTheRateLimitTokenBack
// does the same for a permit refused at once.
func TestATokenIsGivenBackWhenTheContextEndsWaitingForAPermit(t *testing.T) {
	release := make(chan struct{})
	fs, cc := startFault(t, atkHold(release))
	rt := inventory(t, policy.Service{
		RateLimit: &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 2},
		Bulkhead:  &policy.Bulkhead{Permits: 1, MaxWait: 5 * time.Second},
		Methods:   []policy.Method{{Name: getStock, Idempotent: true, Timeout: 5 * time.Second}},
	})
	held := make(chan error, 1)
	go func() { _, err := callGetStock(context.Background(), rt, cc); held <- err }()
	atkWaitFor(t, "the first call holds the permit", func() bool { return fs.Calls(getStock) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := callGetStock(ctx, rt, cc); status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("waiting for a permit: %v, want the caller's DEADLINE_EXCEEDED", err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the holder: %v", err)
	}
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Errorf("third call: %v, want an answer: the second call was not sent, and its token went back", err)
	}
	if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrRateLimited) {
		t.Errorf("fourth call: %v, want ErrRateLimited: the burst of 2 went to the two calls sent", err)
	}
	if got := fs.Calls(getStock); got != 2 {
		t.Errorf("server saw %d calls, want 2", got)
	}
}

// endingCtx is a context that ends (its Err turns non-nil) without closing
// its Done channel: the moment a waiter is handed a permit cannot then
// wake it through Done first, so the test reaches the narrow case of a
// permit handed over just as the context ended.
type endingCtx struct {
	context.Context
	ended atomic.Bool
}

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// TestAPermitHandedOverAsTheContextEndsIsReturnedAtOnce: a waiter handed a
// permit just as its context ended makes no call and gives the permit back.
func TestAPermitHandedOverAsTheContextEndsIsReturnedAtOnce(t *testing.T) {
	release := make(chan struct{})
	fs, cc := startFault(t, atkHold(release))
	rt := inventory(t, policy.Service{
		Bulkhead: &policy.Bulkhead{Permits: 1, MaxWait: 5 * time.Second},
		Methods:  []policy.Method{{Name: getStock, Idempotent: true, Timeout: 5 * time.Second}},
	})
	held := make(chan error, 1)
	go func() { _, err := callGetStock(context.Background(), rt, cc); held <- err }()
	atkWaitFor(t, "the first call holds the permit", func() bool { return fs.Calls(getStock) == 1 })
	ctx := &endingCtx{Context: context.Background()}
	waiter := make(chan error, 1)
	go func() { _, err := callGetStock(ctx, rt, cc); waiter <- err }()
	time.Sleep(50 * time.Millisecond) // the waiter queues for the permit
	ctx.ended.Store(true)
	close(release) // the holder ends and hands its permit to the waiter
	if err := <-held; err != nil {
		t.Fatalf("the holder: %v", err)
	}
	if err := <-waiter; status.Code(err) != codes.Canceled {
		t.Fatalf("the waiter: %v, want CANCELLED", err)
	}
	if n, _ := rt.BulkheadInUse(getStock); n != 0 {
		t.Errorf("%d permits in use, want 0: the handed-over permit was not given back", n)
	}
	if got := fs.Calls(getStock); got != 1 {
		t.Errorf("server saw %d calls, want 1: the waiter made none", got)
	}
}

// TestAMessageThatDoesNotMarshalCountsAsNothing: a request that does not
// marshal, or a response the server cannot marshal, ends the attempt with
// INTERNAL; the breaker counts it as nothing, the metrics under INTERNAL.
func TestAMessageThatDoesNotMarshalCountsAsNothing(t *testing.T) {
	t.Run("the request", func(t *testing.T) {
		fs, cc := startFault(t, server.Healthy)
		reg := prometheus.NewRegistry()
		rt := inventory(t, policy.Service{Breaker: breakerPolicy(1, 1),
			Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second}}}, runtime.WithRegisterer(reg))
		plain := inventoryv1.NewInventoryServiceClient(cc)
		for range 5 {
			_, err := runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: badSku}, nil, plain.GetStock, nil)
			if status.Code(err) != codes.Internal {
				t.Fatalf("bad request: %v, want INTERNAL", err)
			}
		}
		wantBreaker(t, rt, getStock, runtime.StateClosed)
		wantMetric(t, reg, 5, "resilient_client_attempts_total", "method", "GetStock", "code", "INTERNAL")
		if got := fs.Calls(getStock); got != 0 {
			t.Errorf("server saw %d calls, want none", got)
		}
	})

	t.Run("the response", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		bad := &badResponses{}
		inventoryv1.RegisterInventoryServiceServer(gs, bad)
		go func() { _ = gs.Serve(lis) }()
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close(); gs.Stop() })
		reg := prometheus.NewRegistry()
		rt := inventory(t, policy.Service{Breaker: breakerPolicy(1, 1),
			Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second}}}, runtime.WithRegisterer(reg))
		for range 5 {
			if _, err := callGetStock(context.Background(), rt, cc); status.Code(err) != codes.Internal {
				t.Fatalf("bad response: %v, want INTERNAL", err)
			}
		}
		wantBreaker(t, rt, getStock, runtime.StateClosed)
		wantMetric(t, reg, 5, "resilient_client_attempts_total", "method", "GetStock", "code", "INTERNAL")
		if got := bad.calls.Load(); got != 5 {
			t.Errorf("server saw %d calls, want 5", got)
		}
	})
}

// badResponses answers GetStock with a response that does not marshal.
type badResponses struct {
	inventoryv1.UnimplementedInventoryServiceServer
	calls atomic.Int32
}

func (b *badResponses) GetStock(context.Context, *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	b.calls.Add(1)
	return &inventoryv1.GetStockResponse{Sku: badSku}, nil
}

// TestACachesSharedCallCutByItsTimeoutSaysSo: a cached read's shared call
// of one attempt runs under that attempt's own timeout; cut by it, the
// error matches ErrAttemptTimeout and names the attempt and the timeout,
// as the same call without the cache does. The call starts on a
// connection made first, with 300 ms, so that on a loaded machine its
// request reaches the server before it is cut (with 50 ms and a dial
// inside it, at load 8 the server saw none); its end is bounded by the
// timeout plus twice what the scheduler alone made a bare wait for it
// late, plus 150 ms.
func TestACachesSharedCallCutByItsTimeoutSaysSo(t *testing.T) {
	fs, cc := startFault(t, server.Hang)
	readyConn(t, cc)
	const timeout = 300 * time.Millisecond
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: timeout,
		Cache: &policy.Cache{FreshTTL: time.Second, StaleTTL: time.Second, MaxEntries: 10}}}})
	begin := time.Now()
	late := bareWait(timeout)
	_, err := cachedGetStock(context.Background(), rt, cc, "apple")
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, runtime.ErrAttemptTimeout) {
		t.Fatalf("%v, want DEADLINE_EXCEEDED matching ErrAttemptTimeout", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "attempt 1") || !strings.Contains(msg, "per-attempt timeout of 300ms") {
		t.Errorf("message %q, want it to name the attempt and its 300ms timeout", msg)
	}
	if took, bare := time.Since(begin), late(); took > timeout+2*bare+150*time.Millisecond {
		t.Errorf("took %v, want about the %v timeout (a bare wait for it woke %v late)", took, timeout, bare)
	}
	if got := fs.Calls(getStock); got != 1 {
		t.Errorf("server saw %d calls, want 1", got)
	}
}
