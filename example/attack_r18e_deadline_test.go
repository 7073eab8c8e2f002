package example_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// serverMethod edits ReserveStock's server policy.
func serverMethod(edit func(m *policy.ServerMethod)) rserver.Option {
	return rserver.WithPolicy(inventoryName, func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == reserveStock {
				edit(&p.Methods[i])
			}
		}
	})
}

// retryDeadlines lists DEADLINE_EXCEEDED among ReserveStock's retryable
// codes (the runtime retries it only after the attempt's own timeout).
var retryDeadlines = runtime.WithPolicy(func(p *policy.Service) {
	p.Methods[1].Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
})

// TestAttackR18eTooShortIsNotRetriedIntoTheSameRefusal: the server's
// MinDeadline (1.5 s) is longer than the client's per-attempt timeout
// (1 s by a policy edit), and the client retries DEADLINE_EXCEEDED. Every
// attempt would be refused as too short; the refusal is the server's
// answer, not the attempt's own timeout, so the client makes one attempt,
// which the server refuses before the handler, and the caller gets
// DEADLINE_EXCEEDED at once: within 250 ms and twice what a bare wait for
// that long woke late. (With the annotated 300 ms timeout, at load 13 the
// refusal's round trip outlasted it and the attempt's own timeout was
// retried.)
func TestAttackR18eTooShortIsNotRetriedIntoTheSameRefusal(t *testing.T) {
	const timeout, minDeadline, atOnce = time.Second, 1500 * time.Millisecond, 250 * time.Millisecond
	longAttempt := runtime.WithPolicy(func(p *policy.Service) { p.Methods[1].Timeout = timeout })
	r := newRig(t, nil, []rserver.Option{serverMethod(func(m *policy.ServerMethod) { m.MinDeadline = minDeadline })}, retryDeadlines, longAttempt)
	r.warm(t)
	start := time.Now()
	late := bareWait(atOnce)
	_, err := r.client.ReserveStock(context.Background(), &inventoryv1.ReserveStockRequest{OrderId: "o-short", Sku: "a", Units: 1})
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrAttemptTimeout) {
		t.Errorf("ReserveStock with less than MinDeadline per attempt: %v, want the server's DEADLINE_EXCEEDED", err)
	}
	if s := r.stats(); s.DeadlineRefused != 1 {
		t.Errorf("the server refused %d attempts as too short, want 1: the refusal was retried", s.DeadlineRefused)
	}
	if n := r.srv.Calls(reserveStock); n != 0 {
		t.Errorf("the handler ran %d times for requests it refuses", n)
	}
	if bare := late(); took > atOnce+2*bare {
		t.Errorf("the refusal took %v, want it at once (a bare wait of %v woke %v late)", took, atOnce, bare)
	}
}

// TestAttackR18eCallerDeadlineBelowMinDeadline: a caller with 5 ms left
// calls ReserveStock (server MinDeadline 10 ms). At most one attempt
// reaches the server, which refuses it before the handler; the caller
// gets DEADLINE_EXCEEDED and the key is not claimed, so the same order
// with time enough runs. The attempts have 5 s (longTimeouts), so that
// the order sent with time enough has it on a loaded machine.
func TestAttackR18eCallerDeadlineBelowMinDeadline(t *testing.T) {
	r := newRig(t, nil, nil, retryDeadlines, longTimeouts)
	r.warm(t)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-late", Sku: "a", Units: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	_, err := r.client.ReserveStock(ctx, req)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("ReserveStock with 5 ms left: %v, want DEADLINE_EXCEEDED", err)
	}
	if s := r.stats(); s.DeadlineRefused > 1 {
		t.Errorf("the server refused %d attempts as too short, want at most 1", s.DeadlineRefused)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if resp, err := r.client.ReserveStock(ctx, req); err != nil || resp.GetReservationId() != "r-o-late" {
		t.Errorf("the same order with time enough: %v, %v; want it run", resp, err)
	}
	if n := r.srv.Calls(reserveStock); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

// TestAttackR18eRetryWithLittleTimeLeft: the first attempt times out
// (the handler takes 4/3 of the attempt's time and ignores its context)
// and the caller's deadline leaves 2/15 of it after it (as 400 ms, 300 ms
// and 40 ms do). The retry, if sent, waits for the first's outcome or is
// refused as too short; the handler runs once, the server refuses at most
// one attempt as dead, and the caller's error is DEADLINE_EXCEEDED by its
// deadline, not later. The attempt has 900 ms, not the annotated 300 ms:
// at load 10 the first attempt's 300 ms ended before it reached the
// handler, which never ran.
func TestAttackR18eRetryWithLittleTimeLeft(t *testing.T) {
	const attempt = 900 * time.Millisecond
	const handler, caller = attempt * 4 / 3, attempt + attempt*2/15
	longAttempt := runtime.WithPolicy(func(p *policy.Service) { p.Methods[1].Timeout = attempt })
	r := newRig(t, slowReserve(handler, nil), nil, retryDeadlines, longAttempt)
	r.warm(t)
	ctx, cancel := context.WithTimeout(context.Background(), caller)
	defer cancel()
	start := time.Now()
	late := bareWait(caller)
	_, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-tight", Sku: "a", Units: 1})
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("ReserveStock past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	// By its deadline: 150 ms, and twice what the scheduler alone made a
	// bare wait late (576 ms against a fixed 490 ms at load 20).
	if l := late(); took > caller+150*time.Millisecond+2*l {
		t.Errorf("the call returned after %v, well past its %v (a bare wait was %v late)", took, caller, l)
	}
	time.Sleep(handler - caller + 100*time.Millisecond) // the first handler ends
	if s := r.stats(); s.DeadlineRefused > 1 {
		t.Errorf("the server refused %d attempts as dead, want at most 1", s.DeadlineRefused)
	}
	if n := r.srv.Calls(reserveStock); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

// TestAttackR18eServerDefaultTimeoutDoesNotPoisonTheKey: ReserveStock
// without a client timeout, from a caller without a deadline, reaches a
// server whose DefaultTimeout (400 ms) ends the handler (which honours
// its context and would take 800 ms). The caller gets DEADLINE_EXCEEDED,
// once: its own attempt did not time out, so the runtime does not retry
// it. The key is not kept with that failure: the same order, once the
// handler is fast, runs and gets its reservation, not a replay of the
// timeout for the key's 24 hours. The DefaultTimeout leaves the Guard's
// claim on Redis 400 ms before the handler: at 100 ms a loaded machine
// spent it all in the claim, and the Guard refused the request before
// its handler ran (load 8).
func TestAttackR18eServerDefaultTimeoutDoesNotPoisonTheKey(t *testing.T) {
	var slow atomic.Bool
	slow.Store(true)
	b := func(ctx context.Context, c server.Call) error {
		if c.Method == reserveStock && slow.Load() {
			return server.Wait(ctx, 800*time.Millisecond)
		}
		return nil
	}
	noTimeout := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[1].Timeout = 0
		p.Methods[1].Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
	})
	r := newRig(t, b, []rserver.Option{serverMethod(func(m *policy.ServerMethod) { m.DefaultTimeout = 400 * time.Millisecond })}, noTimeout)
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-default", Sku: "a", Units: 1}
	_, err := r.client.ReserveStock(context.Background(), req)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("ReserveStock ended by the server's DefaultTimeout: %v, want DEADLINE_EXCEEDED", err)
	}
	if n := r.srv.Calls(reserveStock); n != 1 {
		t.Errorf("the handler ran %d times, want 1: the server's timeout is not the attempt's", n)
	}
	slow.Store(false)
	resp, err := r.client.ReserveStock(context.Background(), req)
	if err != nil || resp.GetReservationId() != "r-o-default" {
		t.Errorf("the same order once the handler is fast: %v, %v; want it run", resp, err)
	}
	if n := r.srv.Calls(reserveStock); n != 2 {
		t.Errorf("the handler ran %d times in all, want 2", n)
	}
}
