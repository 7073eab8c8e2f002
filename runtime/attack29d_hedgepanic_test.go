package runtime_test

// Attacks on a hedged call's copies that panic or end their goroutine by
// runtime.Goexit (README, Failures and answers: "Of several copies that
// panic, the first goes on and the others are dropped ...; a panic on the
// caller's own goroutine ... goes on alone, once the copies have ended,
// and a copy's panic then is dropped ... A copy's runtime.Goexit is
// handed over as a panic is"; Logs and events), mixing the two kinds,
// and a cache's shared call as the hedged call's caller (Cache: "For a
// hedged method the shared call is the hedged call's caller: a copy's
// panic, while the call reads its copies' answers or waits for its
// losers, reaches the shared call's goroutine once every copy has ended
// ..., and goes on from there in the same way": "A panic in the shared
// call ... reaches every caller still waiting for it, each panicking
// with it").

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk29dEnding is how a call's goroutine ended: returned, panicked (with
// what), or neither (runtime.Goexit).
type atk29dEnding struct {
	returned bool
	panicked any
}

func (e atk29dEnding) String() string {
	switch {
	case e.returned:
		return "returned"
	case e.panicked != nil:
		return fmt.Sprintf("panicked with %v", e.panicked)
	}
	return "ended by runtime.Goexit"
}

// atk29dEndingOf runs call on a goroutine of its own and says how that
// goroutine ended (within 5 s).
func atk29dEndingOf(t *testing.T, call func()) atk29dEnding {
	t.Helper()
	ch := make(chan atk29dEnding, 1)
	go func() {
		var e atk29dEnding
		defer func() { ch <- e }()
		defer func() { e.panicked = recover() }()
		call()
		e.returned = true
	}()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("the call's goroutine had not ended in 5 s")
		return atk29dEnding{}
	}
}

// TestAttack29DHedgedPanicAndGoexitTheFirstGoesOn: three copies (5 ms
// apart), the third answers, the first two are cut as losers. As it is
// cut, one loser ends its goroutine by runtime.Goexit and the other
// panics, 20 ms after the first has ended: the first to end is the one
// that goes on, whichever kind. Goexit first: the caller's goroutine ends
// by runtime.Goexit, and the later panic is dropped (no panic anywhere;
// the program goes on). Panic first: the caller panics with it, and the
// later Goexit is dropped. And a panic of the call's own goroutine (an
// observer of the budget's refusal of the second copy) goes on alone
// when the first copy, cut then, ends by Goexit: the caller panics with
// its own panic, not ending by the copy's Goexit.
func TestAttack29DHedgedPanicAndGoexitTheFirstGoesOn(t *testing.T) {
	for _, c := range []struct {
		name   string
		first  func()
		second func()
		want   func(e atk29dEnding) bool
	}{
		{"Goexit, then panic", goruntime.Goexit, func() { panic("the later panic") },
			func(e atk29dEnding) bool { return !e.returned && e.panicked == nil }},
		{"panic, then Goexit", func() { panic("the first panic") }, goruntime.Goexit,
			func(e atk29dEnding) bool { return e.panicked == "the first panic" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkNoLeak(t)
			firstEnded := make(chan struct{})
			var secondActed atomic.Bool
			cl, running := hedgeLosers(t, 3, func(n int32) {
				if n == 1 {
					close(firstEnded) // just before it ends: the runtime hands it over as it unwinds
					c.first()
					return
				}
				<-firstEnded
				time.Sleep(20 * time.Millisecond)
				secondActed.Store(true)
				c.second()
			})
			var inCopies atomic.Int32
			inCopies.Store(-1)
			e := atk29dEndingOf(t, func() {
				defer func() { inCopies.Store(running.Load()) }()
				_, _ = cl.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
			})
			t.Logf("the caller's goroutine %v; the second loser acted: %v", e, secondActed.Load())
			if !c.want(e) {
				t.Errorf("the first loser's %s came first: the caller's goroutine %v, want it to go on with the first", c.name, e)
			}
			if !secondActed.Load() || inCopies.Load() != 0 {
				t.Errorf("the caller's goroutine ended before its second loser had ended (acted %v, %d copies in the interceptor)",
					secondActed.Load(), inCopies.Load())
			}
		})
	}

	t.Run("the call's own panic, a copy's Goexit", func(t *testing.T) {
		atkNoLeak(t)
		var copyExited atomic.Bool
		icpt := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
			<-ctx.Done()
			copyExited.Store(true)
			goruntime.Goexit()
			return nil
		})
		_, cc := startFaultWith(t, server.Healthy, nil, icpt)
		c := hedgedClientWhoseObserverPanicsAtTheBudget(t, cc)
		var exitedFirst atomic.Bool
		e := atk29dEndingOf(t, func() {
			defer func() { exitedFirst.Store(copyExited.Load()) }()
			_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
		})
		if e.panicked != "the call's observer panicked" {
			t.Errorf("the caller's goroutine %v, want it to panic with its own observer's panic", e)
		}
		if !exitedFirst.Load() {
			t.Errorf("the call's panic went on before its copy, cut, had ended")
		}
	})
}

// TestAttack29DHedgedLoserPanicInASharedCallReachesEveryWaiter: a cached,
// hedged GetStock (2 copies 5 ms apart); three callers of one key share
// its call. The second copy answers; the first, cut as the loser, panics
// in the client's interceptor. The panic reaches the shared call's
// goroutine once both copies ended, and from there every caller still
// waiting, each panicking with it, none on a goroutine of the runtime's
// (which would end this test binary); neither a stale answer nor the
// fallback stands in. A later caller of the key gets an answer.
func TestAttack29DHedgedLoserPanicInASharedCallReachesEveryWaiter(t *testing.T) {
	atkNoLeak(t)
	var sent atomic.Int32
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var releasing sync.Once
	let := func() { releasing.Do(func() { close(release) }) }
	defer let()
	icpt := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch sent.Add(1) {
		case 1:
			arrived <- struct{}{}
			<-ctx.Done() // cut as the loser
			panic("the loser panicked")
		case 2:
			<-release
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	_, cc := startFault(t, server.Healthy, icpt)
	readyConn(t, cc)
	var fellBack atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(prometheus.NewRegistry())},
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			fellBack.Add(1)
			return &inventoryv1.GetStockResponse{Units: -1}, nil
		},
	}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead, p.RateLimit = nil, nil, nil, nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 5*time.Second, 0
		m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 2}
		m.Cache = &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"sku"}}
	})
	var mth *runtime.Method
	for i := 0; ; i++ {
		if mth = c.Runtime().Method(i); mth.Policy().Name == atkGetStock {
			break
		}
	}
	get := func() (*inventoryv1.GetStockResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	}
	const waiters = 3
	endings := make(chan atk29dEnding, waiters)
	for range waiters {
		go func() {
			var e atk29dEnding
			defer func() { endings <- e }()
			defer func() { e.panicked = recover() }()
			_, _ = get()
			e.returned = true
		}()
	}
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the shared call's first copy never reached the interceptor")
	}
	atkWaitFor(t, "3 callers wait for the shared call", func() bool { return mth.CacheWaiters23j("apple") == waiters })
	let()
	var got []atk29dEnding
	for range waiters {
		select {
		case e := <-endings:
			got = append(got, e)
		case <-time.After(5 * time.Second):
			t.Fatalf("after 5 s, %d of the %d waiters had ended: %v", len(got), waiters, got)
		}
	}
	panicked := 0
	for _, e := range got {
		if e.panicked == "the loser panicked" {
			panicked++
		}
	}
	t.Logf("waiters: %v", got)
	if panicked != waiters {
		t.Errorf("%d of %d waiters panicked with the hedged loser's panic, want all: %v", panicked, waiters, got)
	}
	if n := fellBack.Load(); n != 0 {
		t.Errorf("the fallback ran %d times, want none: a panic is no failure of the dependency", n)
	}
	if resp, err := get(); err != nil || resp.GetUnits() != 42 {
		t.Errorf("a later caller of the key: %v %v, want an answer", resp, err)
	}
}
