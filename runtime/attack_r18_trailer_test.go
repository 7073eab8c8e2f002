package runtime_test

// Attack on the pooled trailer slots (pushback.go): a slot goes back to
// the pool once its attempt returned. An interceptor that gives up on its
// invoker when the attempt's context ends, and returns before the invoker
// has, leaves gRPC to write the trailer afterwards: the trailer option is
// applied when the invoker's call finishes. Into a slot reused meanwhile by
// another call, that late write would replace the other call's trailer,
// and its "do not retry" with it (and race with its read).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestAttackR18DetachingInterceptorLeavesOtherCallsTrailersAlone(t *testing.T) {
	// How the interceptor says it gave up: a status of the context's code,
	// or the context's bare error (a status of UNKNOWN to status.Code,
	// which the slot's check missed: the slot went back to the pool while
	// gRPC could still write into it).
	for _, c := range []struct {
		name   string
		giveUp func(context.Context) error
	}{
		{"status", func(ctx context.Context) error { return status.FromContextError(ctx.Err()).Err() }},
		{"bare context error", func(ctx context.Context) error { return ctx.Err() }},
		{"wrapped context error", func(ctx context.Context) error { return fmt.Errorf("gave up: %w", ctx.Err()) }},
	} {
		t.Run(c.name, func(t *testing.T) { atkR18Detaching(t, c.giveUp) })
	}
}

func atkR18Detaching(t *testing.T, giveUp func(context.Context) error) {
	atkNoLeak(t)
	var invokers sync.WaitGroup
	var detached atomic.Int32
	var mu sync.Mutex
	toldOff := map[string]bool{} // calls whose attempt came back with the server's "do not retry"
	var repeated []string        // calls attempted again after that
	detaching := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		id := first(md.Get("x-call"))
		mu.Lock()
		if toldOff[id] {
			repeated = append(repeated, id)
		}
		mu.Unlock()
		if len(md.Get("x-hang")) == 0 {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if status.Code(err) == codes.Unavailable { // the server's, with its -1
				mu.Lock()
				toldOff[id] = true
				mu.Unlock()
			}
			return err
		}
		done := make(chan error, 1)
		invokers.Add(1)
		go func() {
			defer invokers.Done()
			done <- invoker(ctx, method, req, reply, cc, opts...)
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done(): // gives up on the invoker, which finishes later
			detached.Add(1)
			return giveUp(ctx)
		}
	})
	_, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-hang")) > 0 {
			<-ctx.Done() // past the attempt's timeout
			return status.FromContextError(ctx.Err()).Err()
		}
		if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, "-1")); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected, do not retry")
	}, detaching)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100000, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Timeout = 5 * time.Millisecond
		m.Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
		m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
	})
	const callers, calls = 8, 10
	var wg sync.WaitGroup
	for i := range 2 * callers {
		wg.Go(func() {
			for j := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				ctx = metadata.AppendToOutgoingContext(ctx, "x-call", fmt.Sprintf("%d-%d", i, j))
				if i%2 == 0 {
					ctx = metadata.AppendToOutgoingContext(ctx, "x-hang", "1")
				}
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				cancel()
				if err == nil {
					t.Error("a call answered; every attempt fails")
				}
			}
		})
	}
	wg.Wait()
	invokers.Wait()
	if detached.Load() == 0 {
		t.Fatal("the interceptor gave up on no invoker: the test proves nothing")
	}
	if len(toldOff) == 0 {
		t.Fatal("no attempt came back with the server's do-not-retry: the test proves nothing")
	}
	if len(repeated) > 0 {
		t.Errorf("%d attempts after the server said do not retry (calls %v): their trailer was overwritten by another call's late write",
			len(repeated), repeated[:min(len(repeated), 5)])
	}
}
