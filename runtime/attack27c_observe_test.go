package runtime_test

// Attacks on the README's "Logs and events": what an observer that panics
// or blocks does to the other consumers of the same event (the logger, a
// second observer) and to the other callers of the dependency.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack27CPanickingObserverSilencesTheLogAndTheOtherObservers: the
// README (Observability) says "give it a logger (runtime.WithLogger) or an
// observer (runtime.WithObserver) and it reports every transition,
// exhaustion and fallback", each "once, never once per call", and that a
// panic in an observer "goes on to that caller". A client given a logger
// and two observers, the first of which panics at the breaker's opening:
// the panic reaches the caller whose attempt opened the breaker (as
// promised), but is that transition still logged, and seen by the second
// observer? The event is reported once per episode, so an event lost here
// is lost for the whole episode.
func TestAttack27CPanickingObserverSilencesTheLogAndTheOtherObservers(t *testing.T) {
	_, cc := start(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	var log attack25aLog
	second := &atk22eEvents{}
	panicky := func(e runtime.Event) {
		if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen {
			panic("observer bug")
		}
	}
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1)},
		runtime.WithClock(newFakeClock()), runtime.WithRegisterer(reg), runtime.WithLogger(log.logger()),
		runtime.WithObserver(panicky), runtime.WithObserver(second.observe))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	call := func() (err error, panicked any) {
		defer func() { panicked = recover() }()
		_, err = runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		return err, nil
	}
	if err, p := call(); status.Code(err) != codes.Unavailable || p != nil {
		t.Fatalf("first call: %v, panic %v; want UNAVAILABLE from the server", err, p)
	}
	if _, p := call(); p != "observer bug" {
		t.Fatalf("second call (opens the breaker): panic %v, want the observer's", p)
	}
	for range 3 {
		if err, p := call(); !errors.Is(err, runtime.ErrCircuitOpen) || p != nil {
			t.Fatalf("call on the open breaker: %v, panic %v; want ErrCircuitOpen", err, p)
		}
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	opened := atk22eSeries(t, reg)["resilient_client_breaker_transitions_total{breaker=shared,state=open}"]
	var logged int
	for _, l := range log.lines() {
		if strings.Contains(l, `msg="circuit breaker open"`) {
			logged++
		}
	}
	var seen int
	for _, e := range second.all() {
		if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen {
			seen++
		}
	}
	if logged != 1 || seen != 1 {
		t.Errorf("README (Observability): a logger and an observer each report every transition, once. The breaker opened "+
			"(transitions_total{state=open} = %v, state open, 3 calls refused after it), and the first observer panicked "+
			"(the panic reached the caller, as promised); but the logger wrote %d \"circuit breaker open\" lines and the "+
			"second observer saw %d open transitions, want 1 and 1: the first observer's panic took the event from every "+
			"consumer after it, for the whole episode.\nlog:\n%s", opened, logged, seen, strings.Join(log.lines(), "\n"))
	}
}

// atk27cBlockAtOpen returns an observer that blocks when the breaker
// opens, until release is closed; blocked is closed when it first does.
func atk27cBlockAtOpen() (observe func(runtime.Event), blocked, release chan struct{}) {
	blocked, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	return func(e runtime.Event) {
		if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen {
			once.Do(func() { close(blocked) })
			<-release
		}
	}, blocked, release
}

// TestAttack27CBlockingObserverStallsNoOtherCaller: the README says the
// observer runs "synchronously and outside every lock of the runtime", on
// the goroutine of the call that caused the event. An observer that blocks
// at the breaker's opening (an exporter that hangs) therefore holds up
// that one call, and no other: while it blocks, other calls are answered
// by the open breaker at once (ErrCircuitOpen, counted by
// breaker_rejections_total, nothing sent), and the call blocked in it gives
// back what it holds once it returns: the bulkhead's permit.
func TestAttack27CBlockingObserverStallsNoOtherCaller(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	observe, blocked, release := atk27cBlockAtOpen()
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1), Bulkhead: &policy.Bulkhead{Permits: 4}},
		runtime.WithClock(newFakeClock()), runtime.WithRegisterer(reg), runtime.WithObserver(observe))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	call := func(ctx context.Context) error {
		_, err := runtime.Unary(ctx, rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		return err
	}
	if err := call(context.Background()); status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- call(context.Background()) }() // opens the breaker, blocks in the observer
	select {
	case <-blocked:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("the breaker did not open in 5 s")
	}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		err := call(ctx)
		cancel()
		if !errors.Is(err, runtime.ErrCircuitOpen) || time.Since(start) > time.Second {
			t.Errorf("call %d while the observer blocks another: %v after %v, want ErrCircuitOpen at once", i, err, time.Since(start))
		}
	}
	if n, _ := rt.BulkheadInUse(getStock); n != 1 {
		t.Errorf("bulkhead in use while the observer blocks: %d, want 1 (the blocked call's)", n)
	}
	close(release)
	select {
	case err := <-done:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the call that opened the breaker: %v, want its UNAVAILABLE", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call blocked in the observer did not return once released")
	}
	if n, _ := rt.BulkheadInUse(getStock); n != 0 {
		t.Errorf("bulkhead in use after: %d, want 0", n)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("server saw %d calls, want 2", got)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}":     2,
		"resilient_client_breaker_state{breaker=shared}":                        2,
		"resilient_client_breaker_transitions_total{breaker=shared,state=open}": 1,
		"resilient_client_breaker_rejections_total{method=GetStock}":            3,
	}, "2 failures, the breaker opened, 3 refusals while the observer blocked")
}

// TestAttack27CServerPushbackCountedOnceUnderPushback: the README's
// metrics table counts under retries_total{outcome="pushback"} a retry not
// made because of "the server's pushback (a negative pushback or the
// do-not-retry mark, counted when the policy would have retried)". A
// server that sheds with UNAVAILABLE and a negative grpc-retry-pushback-ms:
// on the first attempt of a 3-attempt policy it stops the call there,
// counted once under pushback, no retry made; on the last attempt (the
// policy would not have retried) it is not counted; on a code the policy
// does not retry (INTERNAL) neither; a positive pushback is a retry made.
func TestAttack27CServerPushbackCountedOnceUnderPushback(t *testing.T) {
	var n atomic.Int32
	var shedOn atomic.Int32 // the call number (1-based, per round) that carries the pushback
	var code atomic.Int32
	var push atomic.Value
	push.Store("-1")
	srv, cc := start(t, func(ctx context.Context, _ server.Call) error {
		if n.Add(1) == shedOn.Load() {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, push.Load().(string)))
		}
		return status.Error(codes.Code(code.Load()), "shed")
	})
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retryPolicy(3)}}},
		runtime.WithRegisterer(reg))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	round := func(c codes.Code, on int32, p string) {
		t.Helper()
		n.Store(0)
		shedOn.Store(on)
		code.Store(int32(c))
		push.Store(p)
		_, err := runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		if status.Code(err) != c {
			t.Fatalf("GetStock: %v, want %v", err, c)
		}
	}
	round(codes.Unavailable, 1, "-1") // stopped at the first attempt: 1 attempt, pushback 1
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("a negative pushback on the first attempt: the server saw %d attempts, want 1", got)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 1,
		"resilient_client_retries_total{method=GetStock,outcome=pushback}":  1,
	}, "one call shed with a negative pushback at its first attempt")
	round(codes.Unavailable, 3, "-1") // at the last attempt: 3 attempts, 2 made, no pushback counted
	round(codes.Internal, 1, "-1")    // INTERNAL is not retried: no pushback counted
	round(codes.Unavailable, 1, "1")  // a positive pushback: the retry is made after 1 ms
	if got := srv.Calls(getStock); got != 1+3+1+3 {
		t.Errorf("the server saw %d attempts, want 8", got)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 7,
		"resilient_client_attempts_total{code=INTERNAL,method=GetStock}":    1,
		"resilient_client_retries_total{method=GetStock,outcome=pushback}":  1,
		"resilient_client_retries_total{method=GetStock,outcome=made}":      4,
	}, "a pushback at the last attempt, on INTERNAL, and a positive one")
}

// attack27cPanickingHandler is a slog.Handler whose Handle panics.
type attack27cPanickingHandler struct{}

func (attack27cPanickingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (attack27cPanickingHandler) Handle(context.Context, slog.Record) error { panic("handler bug") }
func (h attack27cPanickingHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h attack27cPanickingHandler) WithGroup(string) slog.Handler           { return h }

// TestAttack27CPanickingLogHandlerLeavesTheObserversTheirEvent: the log
// side of the test above. A slog.Handler that panics at the breaker's
// opening: the panic goes on to the caller whose attempt opened it, and
// the observer still receives the transition, once.
func TestAttack27CPanickingLogHandlerLeavesTheObserversTheirEvent(t *testing.T) {
	_, cc := start(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	rec := &atk22eEvents{}
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1)}, runtime.WithClock(newFakeClock()),
		runtime.WithLogger(slog.New(attack27cPanickingHandler{})), runtime.WithObserver(rec.observe))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	var panics int
	for range 4 {
		func() {
			defer func() {
				if recover() != nil {
					panics++
				}
			}()
			_, _ = runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		}()
	}
	got := attack25aEvents(rec.all())
	want := []string{"breaker transition  closed→open failure ratio reached over the window"} // the shared breaker: no method
	if panics != 1 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("a log handler that panics at the breaker's opening: %d calls panicked (want 1, the one that opened it), "+
			"the observer saw:\n%s\nwant:\n%s", panics, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAttack27CBlockingObserverInASharedCallHoldsNoWaiterPastItsDeadline:
// a cached method's shared call is where the breaker's opening is
// observed when its attempt fails; an observer that blocks there holds up
// the shared call, and the README's cache promises that a caller stops
// waiting for a shared call at its own deadline. Two callers of one key,
// each with a 300 ms deadline, while the observer blocks for as long as the
// test does: both return by their deadline (with its DEADLINE_EXCEEDED),
// not when the observer lets go.
func TestAttack27CBlockingObserverInASharedCallHoldsNoWaiterPastItsDeadline(t *testing.T) {
	_, cc := start(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	observe, blocked, release := atk27cBlockAtOpen()
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(1, 1), Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second,
		Cache: &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Hour, MaxEntries: 10}}}},
		runtime.WithClock(newFakeClock()), runtime.WithObserver(observe))
	defer close(release)
	plain := inventoryv1.NewInventoryServiceClient(cc)
	key := func(*inventoryv1.GetStockRequest) string { return "apple" }
	type result struct {
		err  error
		took time.Duration
	}
	get := func(out chan<- result) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := runtime.UnaryCached(ctx, rt.Method(0), "", key, &inventoryv1.GetStockRequest{Sku: "apple"}, nil, plain.GetStock, nil)
		out <- result{err, time.Since(start)}
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go get(first)
	select {
	case <-blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the breaker did not open in 5 s")
	}
	go get(second) // joins the shared call, blocked in the observer
	for name, ch := range map[string]chan result{"the caller that started the shared call": first, "a caller that joined it": second} {
		select {
		case r := <-ch:
			if status.Code(r.err) != codes.DeadlineExceeded && status.Code(r.err) != codes.Unavailable {
				t.Errorf("%s: %v after %v, want its DEADLINE_EXCEEDED (or the UNAVAILABLE)", name, r.err, r.took)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("README (Cache): a caller stops waiting for the shared call at its own deadline; %s, with a 300 ms deadline, "+
				"is still waiting after 3 s while the observer blocks the shared call", name)
		}
	}
}
