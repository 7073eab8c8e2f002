package runtime_test

// Attack on runtime/unary.go's detached (README, "Pushback"): "An attempt
// that fails once its context is over with DEADLINE_EXCEEDED, CANCELLED
// or an error that is not a gRPC status at all (the context's bare error,
// as an interceptor may return it) may have come back before gRPC
// finished it (an interceptor that stops waiting for its invoker when
// the context ends), so its trailer is neither read nor given back to
// the pool, where gRPC's late write would reach another call's". The
// check reads the code an interceptor returns; these are the shapes of
// giving up it does not list: a code of its own choosing, a custom error
// type, no error at all.

import (
	"context"
	"fmt"
	"strings"
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

// atk29dGaveUp is an interceptor's own error type for "I stopped waiting":
// it wraps the context's error (errors.Is finds it) and says UNAVAILABLE
// to gRPC's status package, as a program mapping its timeouts to a
// retryable code would.
type atk29dGaveUp struct{ ctxErr error }

func (e atk29dGaveUp) Error() string { return "gave up on the dependency: " + e.ctxErr.Error() }
func (e atk29dGaveUp) Unwrap() error { return e.ctxErr }
func (e atk29dGaveUp) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// atk29dDetachResult is what one run of the detaching rig saw.
type atk29dDetachResult struct {
	detached, toldOff, repeated, answered int
	example                               []string
}

// atk29dDetaching runs 16 callers of 10 calls each through an interceptor
// that, for half of them (x-hang), starts its invoker and gives up when
// the attempt's 5 ms timeout ends, returning giveUp(ctx) while gRPC still
// runs the call; the other half reach a server that answers UNAVAILABLE
// with grpc-retry-pushback-ms -1, do not retry. A call attempted again
// after it was told so read a trailer that was not its own: another
// call's late write replaced it in a pooled slot.
func atk29dDetaching(t *testing.T, giveUp func(context.Context) error) atk29dDetachResult {
	t.Helper()
	var invokers sync.WaitGroup
	var detached, answered atomic.Int32
	var mu sync.Mutex
	toldOff := map[string]bool{}
	var repeated []string
	icpt := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
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
			if status.Code(err) == codes.Unavailable {
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
		case <-ctx.Done():
			detached.Add(1)
			return giveUp(ctx)
		}
	})
	_, cc := startFault(t, func(ctx context.Context, _ server.Call) error {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-hang")) > 0 {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
		if err := grpc.SetTrailer(ctx, metadata.Pairs(runtime.PushbackHeader, "-1")); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected, do not retry")
	}, icpt)
	readyConn(t, cc)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 100000, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Timeout = 5 * time.Millisecond
		m.Retry.MaxAttempts = 3
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
				if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err == nil {
					answered.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	invokers.Wait()
	mu.Lock()
	defer mu.Unlock()
	return atk29dDetachResult{detached: int(detached.Load()), toldOff: len(toldOff), repeated: len(repeated),
		answered: int(answered.Load()), example: repeated[:min(len(repeated), 3)]}
}

// TestAttack29DDetachingInterceptorOfAnotherShape: README, Pushback (the
// passage above): an interceptor that stops waiting for its invoker at
// its context's end and then says so in a shape of its own. The
// README's cases (a context code, the bare or wrapped context error) are
// TestAttackR18DetachingInterceptorLeavesOtherCallsTrailersAlone's; here
// the same interceptor returns a code it chose (UNAVAILABLE, as a
// program mapping its give-ups to a retryable code), its own error type
// (wrapping the context's error, its GRPCStatus UNAVAILABLE), or nil (no
// error and no response). In each, gRPC still runs the call and writes
// its trailer when it ends; no call told "do not retry" by the server
// may be attempted again, which it is when that late write reaches the
// pooled slot another call reads its trailer from. A control with the
// wrapped context error (the README's case) must show none.
func TestAttack29DDetachingInterceptorOfAnotherShape(t *testing.T) {
	for _, c := range []struct {
		name   string
		giveUp func(context.Context) error
	}{
		{"control: the wrapped context error", func(ctx context.Context) error { return fmt.Errorf("gave up: %w", ctx.Err()) }},
		{"a code of its own, UNAVAILABLE", func(context.Context) error { return status.Error(codes.Unavailable, "gave up") }},
		{"its own error type", func(ctx context.Context) error { return atk29dGaveUp{ctx.Err()} }},
		{"nil: no error, no response", func(context.Context) error { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.name, "a code of its own") {
				attack21aBroken(t, "a known limit (README, Pushback): an interceptor that gives up and makes up a code of its own, wrapping "+
					"nothing, is taken at its word, its trailer read and pooled; telling it from the server's code just past "+
					"the attempt's deadline would cost that code's pushback (with 5 ms attempts, calls told not to retry "+
					"were retried when every failure past the deadline was taken for a give-up)")
			}
			atkNoLeak(t)
			r := atk29dDetaching(t, c.giveUp)
			t.Logf("%d attempts detached, %d calls told do-not-retry, %d attempts after that (e.g. %v), %d calls answered",
				r.detached, r.toldOff, r.repeated, r.example, r.answered)
			if r.detached == 0 || r.toldOff == 0 {
				t.Fatalf("detached %d, told off %d: the run proves nothing", r.detached, r.toldOff)
			}
			if r.repeated > 0 {
				t.Errorf("%d attempts of calls the server had told not to retry (%v): a detached attempt's late trailer "+
					"reached the pooled slot they read theirs from", r.repeated, r.example)
			}
		})
	}
}
