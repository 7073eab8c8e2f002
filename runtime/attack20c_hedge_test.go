package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack20cHedgedCallReturnsAfterEveryCopyEnded: the README says a
// hedged call returns only once every copy it sent has ended. A client
// interceptor counts the copies inside gRPC; when GetStock returns, it
// must read 0, however the call ends: the caller cancels it with three
// copies hung, the caller's deadline passes with three copies hung, the
// third copy answers while two hang, the first answers before the delay
// (nothing to wait for). Each ends within what the caller allowed plus a
// loaded machine's slack.
func TestAttack20cHedgedCallReturnsAfterEveryCopyEnded(t *testing.T) {
	atkNoLeak(t)
	var active, maxActive atomic.Int32
	counting := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if n := active.Add(1); n > maxActive.Load() {
			maxActive.Store(n)
		}
		defer active.Add(-1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	var answerAt atomic.Int32 // the call number that answers; others hang
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		if int32(c.N) == answerAt.Load() {
			return nil
		}
		return server.Hang(ctx, c)
	}, counting)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Timeout = 2 * time.Second
		m.Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	// The connection is ready before the timed part.
	answerAt.Store(1)
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "warm"}); err != nil {
		t.Fatal(err)
	}
	calls := 1

	check := func(name string, want codes.Code, within time.Duration, call func(ctx context.Context) error) {
		t.Helper()
		maxActive.Store(0)
		begin := time.Now()
		err := call(context.Background())
		took := time.Since(begin)
		left := active.Load()
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if left != 0 {
			t.Errorf("%s: %d copies still in gRPC when the call returned (at most %d ran)", name, left, maxActive.Load())
		}
		if took > within {
			t.Errorf("%s: returned after %v, want within %v", name, took, within)
		}
		calls = srv.Calls(atkGetStock)
	}
	req := &inventoryv1.GetStockRequest{Sku: "apple"}

	answerAt.Store(-1)
	check("cancelled with three copies hung", codes.Canceled, 500*time.Millisecond, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := c.GetStock(ctx, req)
		return err
	})
	if got := maxActive.Load(); got != 3 {
		t.Errorf("cancelled: %d copies ran at once, want 3", got)
	}
	check("deadline with three copies hung", codes.DeadlineExceeded, 500*time.Millisecond, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := c.GetStock(ctx, req)
		return err
	})
	answerAt.Store(int32(calls + 3))
	check("the third copy answers", codes.OK, 500*time.Millisecond, func(ctx context.Context) error {
		_, err := c.GetStock(ctx, req)
		return err
	})
	answerAt.Store(int32(calls + 1))
	check("the first copy answers at once", codes.OK, 300*time.Millisecond, func(ctx context.Context) error {
		_, err := c.GetStock(ctx, req)
		return err
	})
	if got := maxActive.Load(); got != 1 {
		t.Errorf("first copy answers at once: %d copies ran, want 1", got)
	}
}
