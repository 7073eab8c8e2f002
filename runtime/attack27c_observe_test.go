package runtime_test

// Attacks on the README's "Logs and events": what an observer that panics
// or blocks does to the other consumers of the same event (the logger, a
// second observer) and to the other callers of the dependency.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
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
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	observe := func(e runtime.Event) {
		if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen {
			once.Do(func() { close(blocked) })
			<-release
		}
	}
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
