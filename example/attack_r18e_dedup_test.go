package example_test

import (
	"context"
	"fmt"
	"sync"
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

// slowReserve is a ReserveStock handler that takes d and ignores its
// context (it commits whatever its caller does): the worst handler for
// the at-most-once promise.
func slowReserve(d time.Duration, started chan<- struct{}) server.Behaviour {
	var once sync.Once
	return func(_ context.Context, c server.Call) error {
		if c.Method != reserveStock {
			return nil
		}
		once.Do(func() {
			if started != nil {
				close(started)
			}
		})
		time.Sleep(d)
		return nil
	}
}

// TestAttackR18eReserveStockRunsOnceThroughNetworkFaults: the generated
// client retries ReserveStock (keyed by order id) across a fault of the
// network between it and the Guard with Redis dedup. Whatever the fault,
// the handler runs once for the key and the caller gets its answer; a
// later call with the same order is a replay.
//
// Where a fault is timed against the per-attempt timeout, the attempts
// have `attempt` (900 ms, three times the annotated 300 ms) and the fault
// is scaled with it (the handler 4/3 of it, the replies held 2/3 of it
// until 7/6 of it, as 400, 200 and 350 ms were of 300 ms): under
// 300 ms, at load 24 a retry waiting for the first attempt's outcome, or
// reading its replay from Redis, was cut by its own timeout. The cases
// without a timed fault have 5 s (longTimeouts).
func TestAttackR18eReserveStockRunsOnceThroughNetworkFaults(t *testing.T) {
	const attempt = 900 * time.Millisecond
	retryDeadline := runtime.WithPolicy(func(p *policy.Service) {
		m := &p.Methods[1]
		m.Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
		m.Timeout = attempt
	})
	cases := []struct {
		name    string
		handler time.Duration
		opts    []runtime.Option
		fault   func(r *rig, started <-chan struct{})
	}{
		{"reply lost after the handler ran", 0, []runtime.Option{longTimeouts}, func(r *rig, _ <-chan struct{}) {
			r.proxy.LoseNextReply()
		}},
		{"connection reset while the handler runs", 100 * time.Millisecond, []runtime.Option{longTimeouts}, func(r *rig, started <-chan struct{}) {
			go func() {
				<-started
				r.proxy.Cut()
				r.proxy.Restore()
			}()
		}},
		// The attempt's time ends while the handler still runs; with
		// DEADLINE_EXCEEDED retryable the next attempt arrives while the
		// first holds the key, and waits for its outcome.
		{"per-attempt timeout shorter than the handler", attempt * 4 / 3, []runtime.Option{retryDeadline}, nil},
		{"replies slower than the per-attempt timeout", 0, []runtime.Option{retryDeadline}, func(r *rig, _ <-chan struct{}) {
			r.proxy.DelayReplies(attempt * 2 / 3)
			go func() {
				time.Sleep(attempt * 7 / 6)
				r.proxy.DelayReplies(0)
			}()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			r := newRig(t, slowReserve(tc.handler, started), nil, tc.opts...)
			r.warm(t)
			if tc.fault != nil {
				tc.fault(r, started)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*attempt+3*time.Second)
			defer cancel()
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-" + fmt.Sprint(len(tc.name)), Sku: "apple", Units: 1}
			resp, err := r.client.ReserveStock(ctx, req)
			if err != nil || resp.GetReservationId() != "r-"+req.OrderId {
				t.Fatalf("ReserveStock across the fault: %v, %v; want its answer", resp, err)
			}
			if n := r.srv.Calls(reserveStock); n != 1 {
				t.Errorf("the handler ran %d times for one key, want 1 (keys seen %v)", n, r.srv.Keys(reserveStock))
			}
			again, err := r.client.ReserveStock(ctx, req)
			if err != nil || again.GetReservationId() != resp.GetReservationId() || r.srv.Calls(reserveStock) != 1 {
				t.Errorf("a later call with the same order: %v, %v after %d runs; want the replay", again, err, r.srv.Calls(reserveStock))
			}
			if s := r.stats(); s.Replayed == 0 || s.InFlight != 0 {
				t.Errorf("guard stats %+v: want a replay and no place held", s)
			}
		})
	}
}

// TestAttackR18eConcurrentRetriesOfOneOrder: eight callers send the same
// order at once through a proxy that loses the first reply and then
// resets every connection while the handler runs. The handler runs once;
// every caller gets the same reservation or an error (never a second,
// different answer), and one more call after the faults gets the replay.
// The handler takes 300 ms, so that the reset 20 ms after it started
// comes while it runs however late a loaded machine wakes the resetter
// (80 ms left it 60 ms), and the calls have 5 s per attempt
// (longTimeouts): under the annotated 300 ms a retry waiting for the
// handler's outcome, or the last call's replay from Redis, could time out
// on a loaded machine, and the timeouts open the shared breaker.
func TestAttackR18eConcurrentRetriesOfOneOrder(t *testing.T) {
	started := make(chan struct{})
	r := newRig(t, slowReserve(300*time.Millisecond, started), nil, longTimeouts)
	r.warm(t)
	r.proxy.LoseNextReply()
	go func() {
		<-started
		time.Sleep(20 * time.Millisecond)
		r.proxy.Cut()
		r.proxy.Restore()
	}()
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-many", Sku: "apple", Units: 1}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	answers := make([]string, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			resp, err := r.client.ReserveStock(ctx, req)
			answers[i], errs[i] = resp.GetReservationId(), err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil && answers[i] != "r-o-many" {
			t.Errorf("caller %d got %q, want r-o-many", i, answers[i])
		}
		if err != nil && status.Code(err) == codes.OK {
			t.Errorf("caller %d: an error without a code: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := r.client.ReserveStock(ctx, req)
	if err != nil || resp.GetReservationId() != "r-o-many" {
		t.Errorf("a call after the faults: %v, %v; want the replay", resp, err)
	}
	if n := r.srv.Calls(reserveStock); n != 1 {
		t.Errorf("the handler ran %d times for one key, want 1 (errors %v)", n, errs)
	}
	if s := r.stats(); s.InFlight != 0 {
		t.Errorf("guard stats %+v: a place is still held", s)
	}
}

// TestAttackR18eRetryShedBehindItsOwnFirstAttempt: the connection is
// reset while ReserveStock's handler runs (it ignores its context), and
// the service has one place for high work, which that handler keeps. The
// client's retry, with the same key, is shed (RESOURCE_EXHAUSTED, final):
// the caller learns that the server is shedding and when to come back,
// not that the order failed; the handler runs once, and the order sent
// again after the pushback gets the reservation that was made. The
// handler takes 500 ms, so that the reset and the retry come while it
// holds the place however late a loaded machine runs them (150 ms was
// over before the retry arrived at load 12, and the retry was served);
// the attempts have 5 s (longTimeouts), so that only the reset ends the
// first. The pushback (1 s) leaves the first attempt 500 ms past its
// handler to keep its outcome and free its place: 200 ms past a 150 ms
// handler left 50 ms, and at load 8 the order sent again was shed
// behind it.
func TestAttackR18eRetryShedBehindItsOwnFirstAttempt(t *testing.T) {
	started := make(chan struct{})
	r := newRig(t, slowReserve(500*time.Millisecond, started),
		[]rserver.Option{shedLimits(policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 2}, codes.ResourceExhausted, time.Second)}, longTimeouts)
	r.warm(t)
	go func() {
		<-started
		r.proxy.Cut()
		r.proxy.Restore()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-shedretry", Sku: "a", Units: 1}
	_, err := r.client.ReserveStock(ctx, req)
	d, ok := runtime.Pushback(err, nil)
	if status.Code(err) != codes.ResourceExhausted || !ok || d <= 0 {
		t.Fatalf("the retry shed behind its first attempt: %v (pushback %v %v); want RESOURCE_EXHAUSTED with when to come back", err, d, ok)
	}
	time.Sleep(d)
	resp, err := r.client.ReserveStock(ctx, req)
	if err != nil || resp.GetReservationId() != "r-o-shedretry" {
		t.Errorf("the order sent again after the pushback: %v, %v; want the reservation made", resp, err)
	}
	if n := r.srv.Calls(reserveStock); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}
