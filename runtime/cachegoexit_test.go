package runtime_test

// The goroutine of a cache's shared call ended by runtime.Goexit (a
// test's t.FailNow in an interceptor or in an observer of an event raised
// there, or a hedged copy's handed over by the hedge: README, Failures and
// answers). The goroutine ends, as Goexit means it to; the shared call
// ends with it: its waiters get an error saying so at once, instead of
// waiting for a call that never ends until their own contexts do, and the
// next caller of the key starts a new call instead of joining the dead
// one.

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// cgxRig is a cached GetStock (key "apple", its sku) on a real loopback
// server whose first shared call is held in the client's interceptor
// until release is closed, then ends its goroutine by runtime.Goexit in
// the way of the source; exited is closed as the Goexit begins. next
// makes a later call answer (the server healthy, the breaker's cool-down
// over); fellBack counts the fallback's runs.
type cgxRig struct {
	srv       *faultserver.Server
	c         *inventoryv1.InventoryServiceResilientClient
	m         *runtime.Method
	arrived   chan struct{}
	release   chan struct{}
	exited    chan struct{}
	next      func()
	fellBack  atomic.Int32
	releasing sync.Once
}

// cgxSources are the ways the shared call's goroutine ends by Goexit.
var cgxSources = []struct {
	name string
	rig  func(t *testing.T) *cgxRig
}{
	// An interceptor's t.FailNow once gRPC answered.
	{"interceptor", func(t *testing.T) *cgxRig {
		r := newCgxRig()
		var armed atomic.Bool
		armed.Store(true)
		r.build(t, server.Healthy, r.goexitOnce(&armed), nil, nil)
		return r
	}},
	// An observer's t.FailNow at the breaker's opening by the shared
	// call's failed attempt, raised on the shared call's goroutine.
	{"observer", func(t *testing.T) *cgxRig {
		r := newCgxRig()
		var armed atomic.Bool
		armed.Store(true)
		clock := newAtkClock()
		observer := runtime.WithObserver(func(e runtime.Event) {
			if atk27gOpened(e) && armed.CompareAndSwap(true, false) {
				close(r.exited)
				goruntime.Goexit()
			}
		})
		r.build(t, server.Fail(codes.Unavailable), r.holdFirst(), []runtime.Option{runtime.WithClock(clock), observer},
			func(p *policy.Service, _ *policy.Method) {
				p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: time.Minute, CoolDown: time.Second,
					HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
			})
		r.next = func() {
			r.srv.SetBehaviour(server.Healthy)
			clock.Advance(2 * time.Second) // the cool-down over: the next call is the probe
		}
		return r
	}},
	// A hedged copy's: copy 1 is cut as the loser once copy 2 answered,
	// and ends its goroutine; the hedge hands the Goexit to the call's
	// goroutine, the shared call's, which it ends once every copy ended.
	{"hedged loser", func(t *testing.T) *cgxRig {
		r := newCgxRig()
		var sent atomic.Int32
		icpt := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			switch sent.Add(1) {
			case 1:
				r.arrived <- struct{}{}
				<-ctx.Done() // cut as the loser
				close(r.exited)
				goruntime.Goexit()
			case 2:
				<-r.release
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		r.build(t, server.Healthy, icpt, nil, func(_ *policy.Service, m *policy.Method) {
			m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 2}
		})
		return r
	}},
}

func newCgxRig() *cgxRig {
	return &cgxRig{arrived: make(chan struct{}, 1), release: make(chan struct{}), exited: make(chan struct{}), next: func() {}}
}

// let releases the held call, once.
func (r *cgxRig) let() { r.releasing.Do(func() { close(r.release) }) }

// hold is the held call's wait at the gate.
func (r *cgxRig) hold(ctx context.Context) {
	r.arrived <- struct{}{}
	select {
	case <-r.release:
	case <-ctx.Done():
	}
}

// holdFirst is an interceptor holding the client's first call at the gate.
func (r *cgxRig) holdFirst() grpc.UnaryClientInterceptor {
	var first atomic.Bool
	first.Store(true)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if first.CompareAndSwap(true, false) {
			r.hold(ctx)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

func (r *cgxRig) build(t *testing.T, b server.Behaviour, icpt grpc.UnaryClientInterceptor, opts []runtime.Option,
	edit func(p *policy.Service, m *policy.Method)) {
	t.Helper()
	srv, cc := startFault(t, b, grpc.WithChainUnaryInterceptor(icpt))
	t.Cleanup(r.let) // a test that failed early lets the held call end
	readyConn(t, cc)
	r.srv = srv
	r.c = atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: append(opts, runtime.WithRegisterer(prometheus.NewRegistry())),
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			r.fellBack.Add(1)
			return &inventoryv1.GetStockResponse{Units: -1}, nil
		},
	}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead, p.RateLimit = nil, nil, nil, nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 5*time.Second, 0
		m.Cache = &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"sku"}}
		if edit != nil {
			edit(p, m)
		}
	})
	for i := 0; ; i++ {
		if r.m = r.c.Runtime().Method(i); r.m.Policy().Name == atkGetStock {
			break
		}
	}
}

func (r *cgxRig) wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not in 10 s", what)
	}
}

type cgxResult struct {
	resp *inventoryv1.GetStockResponse
	err  error
	took time.Duration
}

func (r *cgxRig) get(d time.Duration) cgxResult {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	resp, err := r.c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	return cgxResult{resp, err, time.Since(start)}
}

func (c cgxResult) String() string {
	if c.err != nil {
		return fmt.Sprintf("%v %.70q… after %v", status.Code(c.err), status.Convert(c.err).Message(), c.took.Round(time.Millisecond))
	}
	return fmt.Sprintf("%d units after %v", c.resp.GetUnits(), c.took.Round(time.Millisecond))
}

// cgxGoexitError reports whether err is the error of a shared call ended
// by runtime.Goexit: a *runtime.Error, INTERNAL, saying so.
func cgxGoexitError(err error) bool {
	var re *runtime.Error
	return errors.As(err, &re) && status.Code(err) == codes.Internal && strings.Contains(status.Convert(err).Message(), "runtime.Goexit")
}

// TestCacheSharedCallGoexitEndsTheSharedCall: three callers (2 s
// deadlines) wait for the shared call of one key when its goroutine ends
// by runtime.Goexit (an interceptor's, an observer's, a hedged loser's).
// Each must get at once the shared call's INTERNAL error naming
// runtime.Goexit (not its deadline, not the fallback: as for a panic,
// the fault is the client's own), and a later caller (1 s deadline,
// started once they returned, or 500 ms after the Goexit) must start a
// new call and get its answer, not join the dead call; no goroutine is
// left behind, and the cache holds no flight of the key afterwards.
// Before, the shared call was never marked done: every waiter waited
// until its deadline (DEADLINE_EXCEEDED after 2 s, and then the
// fallback), the later caller joined the dead call (DEADLINE_EXCEEDED
// after 1 s, no call sent), and a caller without a deadline would have
// waited forever.
func TestCacheSharedCallGoexitEndsTheSharedCall(t *testing.T) {
	for _, src := range cgxSources {
		t.Run(src.name, func(t *testing.T) {
			atkNoLeak(t)
			r := src.rig(t)
			const waiters = 3
			results := make(chan cgxResult, waiters)
			for range waiters {
				go func() { results <- r.get(2 * time.Second) }()
			}
			r.wait(t, r.arrived, "the shared call reaches the client's interceptor")
			atkWaitFor(t, "3 callers wait for the shared call", func() bool { return r.m.CacheWaiters23j("apple") == waiters })
			r.let()
			r.wait(t, r.exited, "the runtime.Goexit")
			var got []cgxResult
			soon := time.After(500 * time.Millisecond)
		early:
			for len(got) < waiters {
				select {
				case res := <-results:
					got = append(got, res)
				case <-soon:
					break early
				}
			}
			before := r.srv.Calls(atkGetStock)
			r.next()
			later := r.get(time.Second)
			sent := r.srv.Calls(atkGetStock) - before
			for len(got) < waiters {
				got = append(got, <-results)
			}
			t.Logf("waiters: %v; later caller: %v, %d call(s) sent", got, later, sent)
			ended := 0
			for _, res := range got {
				if cgxGoexitError(res.err) && res.took < time.Second {
					ended++
				}
			}
			if ended != waiters {
				t.Errorf("the shared call's goroutine ended by runtime.Goexit (%s) with %d callers waiting for it; "+
					"%d of them got at once an INTERNAL error naming runtime.Goexit, want all: they got %v",
					src.name, waiters, ended, got)
			}
			if later.err != nil || later.resp.GetUnits() != 42 || sent < 1 {
				t.Errorf("a later caller of the key got %v with %d calls sent for it; want a new shared call's answer "+
					"(42 units), not to join the dead call", later, sent)
			}
			if n := r.fellBack.Load(); n != 0 {
				t.Errorf("the fallback ran %d times; want none: a runtime.Goexit on the client's side is no failure of the dependency", n)
			}
			if inFlight, abandoned := r.m.CacheFlightsGoexit("apple"); inFlight || abandoned != 0 {
				t.Errorf("after every call ended, the cache holds a flight of the key (%v) and %d abandoned ones, want none",
					inFlight, abandoned)
			}
		})
	}
}

// TestCacheAbandonedSharedCallGoexitIsForgotten: the only caller of the
// key leaves (its 100 ms deadline) while the shared call is held; the
// call's goroutine then ends by runtime.Goexit. Nobody waits for it: the
// goroutine ends, and the cache forgets the call. Before, the abandoned
// call was kept among the key's abandoned calls forever, one per such
// call.
func TestCacheAbandonedSharedCallGoexitIsForgotten(t *testing.T) {
	atkNoLeak(t)
	r := cgxSources[0].rig(t) // the interceptor's
	done := make(chan cgxResult, 1)
	go func() { done <- r.get(100 * time.Millisecond) }()
	r.wait(t, r.arrived, "the shared call reaches the client's interceptor")
	if res := <-done; res.err != nil || res.resp.GetUnits() != -1 {
		t.Fatalf("the caller whose deadline passed: %v, want the fallback's answer (-1 units)", res)
	}
	if inFlight, abandoned := r.m.CacheFlightsGoexit("apple"); inFlight || abandoned != 1 {
		t.Fatalf("the caller left: the cache holds a flight of the key (%v) and %d abandoned ones, want none and 1", inFlight, abandoned)
	}
	r.let()
	r.wait(t, r.exited, "the runtime.Goexit")
	atkWaitFor(t, "the abandoned shared call forgotten once its goroutine ended", func() bool {
		_, abandoned := r.m.CacheFlightsGoexit("apple")
		return abandoned == 0
	})
	if res := r.get(time.Second); res.err != nil || res.resp.GetUnits() != 42 {
		t.Errorf("the next caller: %v, want a new call's answer", res)
	}
}

// goexitOnce is a client interceptor that, while armed (once, disarming
// itself), holds the call (r.hold), lets gRPC answer, and then ends its
// goroutine by runtime.Goexit, as a t.FailNow there would: on a cached
// method, the shared call's goroutine.
func (r *cgxRig) goexitOnce(armed *atomic.Bool) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !armed.CompareAndSwap(true, false) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		r.hold(ctx)
		_ = invoker(ctx, method, req, reply, cc, opts...)
		close(r.exited)
		goruntime.Goexit()
		return nil
	}
}
