package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack24gFastErrorAnswersDoNotCollapseTheLimit: a real server
// answers GetStock in 20 ms, then for 400 ms answers everything at once
// with INTERNAL (an answer, not an overload: a bad release), then in 20 ms
// again. 12 callers in a loop under the shared adaptive limit (initial 16,
// 300 ms attempts, no breaker, no retries). The instant errors must not
// become the latency the answers are judged against: before, the baseline
// fell to the errors' fraction of a millisecond, every round of answers
// after the recovery was "tens of times slower", the limit fell to 1 and
// most calls of the recovered server were refused locally for the 30 s
// the baseline remembers.
func TestAttack24gFastErrorAnswersDoNotCollapseTheLimit(t *testing.T) {
	srv, cc := startFault(t, server.Slow(20*time.Millisecond))
	c := adaptiveClient(t, cc, func(p *policy.Service) {
		p.Breaker = nil
		p.Bulkhead = &policy.Bulkhead{Permits: 16, MaxWait: 20 * time.Millisecond}
		p.AdaptiveLimit = &policy.AdaptiveLimit{}
		p.Methods[0].Timeout, p.Methods[0].Retry = 300*time.Millisecond, nil
	})
	var ok, internal, limited atomic.Int64
	run := func(d time.Duration) {
		until := time.Now().Add(d)
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				for time.Now().Before(until) {
					_, err := getStockOf(context.Background(), c)
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, runtime.ErrConcurrencyLimited):
						limited.Add(1)
						time.Sleep(time.Millisecond)
					case status.Code(err) == codes.Internal:
						internal.Add(1)
					default:
						t.Errorf("unexpected %v", err)
					}
				}
			})
		}
		wg.Wait()
	}
	run(400 * time.Millisecond)
	t.Logf("healthy: %d answers, %d refused", ok.Load(), limited.Load())
	srv.SetBehaviour(server.Fail(codes.Internal))
	run(400 * time.Millisecond)
	t.Logf("instant INTERNAL: %d errors, %d refused", internal.Load(), limited.Load())
	if internal.Load() == 0 {
		t.Fatal("no INTERNAL answer during the bad release")
	}
	srv.SetBehaviour(server.Slow(20 * time.Millisecond))
	ok.Store(0)
	limited.Store(0)
	// The limit may have fallen during the errors (a fraction of a
	// millisecond is mostly the scheduler's noise): it has 300 ms, 15
	// rounds, to grow back; then it is held for 400 ms.
	run(300 * time.Millisecond)
	t.Logf("recovering 300 ms: %d answers, %d refused", ok.Load(), limited.Load())
	ok.Store(0)
	limited.Store(0)
	before := srv.Calls(getStock)
	run(400 * time.Millisecond)
	reached := srv.Calls(getStock) - before
	t.Logf("recovered 400 ms: %d answers, %d refused locally, %d calls reached the server", ok.Load(), limited.Load(), reached)
	if limited.Load() > ok.Load() {
		t.Errorf("after the recovery %d calls were refused by the limit for %d answers: want fewer refused than answered", limited.Load(), ok.Load())
	}
}
