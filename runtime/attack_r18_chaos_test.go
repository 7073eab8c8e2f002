package runtime_test

// Attack on the breaker's and the bulkheads' transitions under many
// goroutines at once: unary calls and streams sharing one breaker, against
// a server that fails, hangs and answers at random, with callers that
// cancel mid-flight, abandon streams or read them to their end, while the
// clock races through cool-downs. Whatever interleaving the transitions
// met, nothing may be kept: once the server is healthy, the breaker closes
// within a few cool-downs (a probe never given back would hold it
// half-open for good) and every permit is back.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18Chaos fails 40 % of calls UNAVAILABLE, hangs 10 % until the caller
// gives up, and answers the rest, while healthy is false.
func r18Chaos(healthy *atomic.Bool) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		if healthy.Load() {
			return nil
		}
		switch r := rand.IntN(10); {
		case r < 4:
			return status.Error(codes.Unavailable, "injected")
		case r < 5:
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
		return nil
	}
}

func TestAttackR18TransitionsUnderManyGoroutinesKeepNothing(t *testing.T) {
	atkNoLeak(t)
	var healthy atomic.Bool
	fs, cc := startFault(t, r18Chaos(&healthy))
	readyConn(t, cc)
	clock := newAtkClock()
	const coolDown = time.Second
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithClock(clock)}},
		func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.3, MinimumCalls: 4, Window: 2 * time.Second, CoolDown: coolDown,
				HalfOpenProbes: 2, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
			p.Bulkhead = &policy.Bulkhead{Permits: 6, MaxWait: time.Millisecond}
			g := atkMethod(p, atkGetStock)
			// 500 ms: a hung call is cut by it in the chaos, and a call to
			// the healthy server afterwards must end inside it (at load 15,
			// one took more than 200 ms).
			g.Timeout = 500 * time.Millisecond
			g.Retry.InitialBackoff, g.Retry.MaxBackoff = time.Millisecond, 2*time.Millisecond
			w := atkMethod(p, atkWatchStock)
			w.Timeout = 300 * time.Millisecond
		})
	rt := c.Runtime()

	// Four times: chaos, then healthy. Each chaos ends the breaker in
	// whatever state the last goroutines left it.
	for cycle := range 4 {
		healthy.Store(false)
		before := fs.Calls(atkGetStock)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // the clock: a cool-down every few milliseconds
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					clock.Advance(coolDown / 3)
				}
			}
		})
		var opened atomic.Int64
		for i := range 12 {
			wg.Go(func() { // unary callers; one in two cancels mid-flight
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					if i%2 == 0 {
						time.AfterFunc(time.Duration(rand.IntN(3000))*time.Microsecond, cancel)
					}
					_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
					cancel()
				}
			})
		}
		for i := range 4 {
			wg.Go(func() { // streams: read to the end, cancelled after one message, or cancelled unread
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithCancel(context.Background())
					st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"})
					if err != nil {
						cancel()
						continue
					}
					opened.Add(1)
					switch i % 3 {
					case 0:
						for {
							if _, err := st.Recv(); err != nil {
								break // io.EOF, or the server's failure
							}
						}
					case 1:
						_, _ = st.Recv()
					case 2: // unread
					}
					cancel()
				}
			})
		}
		// At least 100 ms of chaos, and until this cycle's calls reached
		// the server and a stream was opened (on a loaded machine 100 ms
		// was not always enough for both), for at most 10 s.
		time.Sleep(100 * time.Millisecond)
		for end := time.Now().Add(10 * time.Second); (fs.Calls(atkGetStock) == before || opened.Load() == 0) && time.Now().Before(end); {
			time.Sleep(2 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		if calls := fs.Calls(atkGetStock) - before; calls == 0 || opened.Load() == 0 {
			t.Fatalf("cycle %d: the server saw %d calls, %d streams were opened: the chaos did not run", cycle, calls, opened.Load())
		}

		// Healthy now: within a few cool-downs the breaker closes and stays so.
		healthy.Store(true)
		closed := false
		for range 5 {
			clock.Advance(2 * coolDown)
			for range 4 {
				_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
			}
			if s, _ := rt.BreakerState(atkGetStock); s == runtime.StateClosed {
				closed = true
				break
			}
		}
		if !closed {
			s, _ := rt.BreakerState(atkGetStock)
			t.Fatalf("cycle %d: the breaker is %v after 5 cool-downs against a healthy server: a probe was never given back", cycle, s)
		}
		for range 20 {
			if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
				t.Fatalf("cycle %d: a call on the closed breaker, healthy server: %v", cycle, err)
			}
		}
		atkWaitFor(t, "every permit back", func() bool {
			return atkInUse(t, rt, atkGetStock) == 0 && atkInUse(t, rt, atkWatchStock) == 0
		})
	}
}
