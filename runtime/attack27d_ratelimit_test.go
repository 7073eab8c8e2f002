package runtime_test

// Attacks on the rate limit's own bucket (README, Semantics, "Rate limit",
// and "Order of the layers"): a token handed over as the caller's context
// ends, the order of the queue with callers leaving it, the waits each
// caller is promised, and what a refusal says.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk27dCtx is a caller's context that runs hook the first time the
// runtime asks for its Done channel: that is in the rate limit's wait,
// right after the call joined the queue (the layers before it read only
// Err and Deadline), so the hook runs once the call is queued, on the
// caller's goroutine, before the wait looks at anything.
type atk27dCtx struct {
	context.Context
	once sync.Once
	hook func()
}

func (c *atk27dCtx) Done() <-chan struct{} {
	c.once.Do(c.hook)
	return c.Context.Done()
}

// atk27dClient is the inventory client with only the rate limit p, the
// service's, on its methods, GetStock made of one attempt with a long
// timeout.
func atk27dClient(t *testing.T, cc grpc.ClientConnInterface, p policy.RateLimit) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(s *policy.Service) {
		s.Breaker, s.Bulkhead, s.AdaptiveLimit, s.ClientThrottle = nil, nil, nil, nil
		s.RateLimit = &p
		m := atkMethod(s, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout, m.Hedging = nil, 10*time.Second, 0, nil
	})
}

var atk27dApple = &inventoryv1.GetStockRequest{Sku: "apple"}

// TestAttack27DATokenGivenAsTheContextEndsGoesBack: README, Order of the
// layers: "A context that ends while the call waits for a token or a
// permit ends the wait the same way (the token is given back; ...)". 16
// clients, each with a bucket of 1 at 5/s that lets a call wait 1 s. On
// each, a first call takes the token, and a second waits for the next,
// due 200 ms later; its caller's context ends at 250 ms, after the token
// was handed to it and before the call looked (the hook of its Done
// channel holds the caller until then): its call never reaches the
// server, so its token must go back to the bucket. A third call, right
// after, with 50 ms to its deadline, then finds that token; were it spent,
// the next token would be about 150 ms away and the call refused.
func TestAttack27DATokenGivenAsTheContextEndsGoesBack(t *testing.T) {
	atkNoLeak(t)
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	const clients = 16
	var lost, cancelled, other atomic.Int32
	var why sync.Map
	var wg sync.WaitGroup
	for i := range clients {
		c := atk27dClient(t, cc, policy.RateLimit{RequestsPerSecond: 5, Burst: 1, MaxWait: time.Second})
		wg.Go(func() {
			if _, err := c.GetStock(context.Background(), atk27dApple); err != nil {
				other.Add(1)
				why.Store(i, fmt.Sprint("first call: ", err))
				return
			}
			first := time.Now()
			base, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx := &atk27dCtx{Context: base, hook: func() {
				time.Sleep(time.Until(first.Add(250 * time.Millisecond)))
				cancel()
			}}
			if _, err := c.GetStock(ctx, atk27dApple); status.Code(err) == codes.Canceled {
				cancelled.Add(1)
			} else {
				other.Add(1)
				why.Store(i, fmt.Sprint("second call: ", err))
				return
			}
			tctx, tcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer tcancel()
			switch _, err := c.GetStock(tctx, atk27dApple); {
			case err == nil:
			case errors.Is(err, runtime.ErrRateLimited):
				lost.Add(1)
				why.Store(i, fmt.Sprint("third call: ", err))
			default:
				other.Add(1)
				why.Store(i, fmt.Sprint("third call: ", err))
			}
		})
	}
	wg.Wait()
	why.Range(func(k, v any) bool { t.Logf("client %v (one of them): %v", k, v); return false })
	if n := other.Load(); n != 0 {
		t.Fatalf("%d clients saw another answer than expected", n)
	}
	if sent, want := fs.Calls(atkGetStock), 2*clients-int(lost.Load()); sent != want {
		t.Errorf("the server saw %d calls, want %d (each client's first and third, none of the cancelled)", sent, want)
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("README, Order of the layers: a context that ends while the call waits for a token gives the token back; "+
			"of %d calls whose context ended as they were handed their token (none reached the server), %d spent it: "+
			"the next call, with 50 ms to its deadline, was refused, its token about 150 ms away", cancelled.Load(), n)
	}
}
