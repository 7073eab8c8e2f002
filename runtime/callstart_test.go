package runtime_test

// A call whose caller set a deadline reads the clock once at its start
// (over, to refuse a deadline already past), and its first attempt counts
// its timeout from that reading instead of reading the clock again
// (invocation.start). These tests hold the reading to the call's start:
// an attempt that begins later (after a wait for a bulkhead's permit or a
// rate limit's token, or after a failed attempt and its backoff) must get
// its whole timeout, which the server reads from the grpc-timeout it is
// sent. With the call's start reused there, the server would see the
// timeout less the wait.

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime/policy"
)

const (
	callStartTimeout = 400 * time.Millisecond // the attempts' timeout
	callStartWait    = 200 * time.Millisecond // how long the second attempt starts after the call
)

// callStartServer records the time each GetStock call has left when it
// arrives; first (if not nil) is how the first call is answered.
type callStartServer struct {
	mu    sync.Mutex
	left  []time.Duration
	first server.Behaviour
}

func (s *callStartServer) behaviour(ctx context.Context, c server.Call) error {
	dl, ok := ctx.Deadline()
	s.mu.Lock()
	n := len(s.left)
	if ok {
		s.left = append(s.left, time.Until(dl))
	} else {
		s.left = append(s.left, -1)
	}
	s.mu.Unlock()
	if n == 0 && s.first != nil {
		return s.first(ctx, c)
	}
	return nil
}

func (s *callStartServer) arrivals() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.left...)
}

// wholeTimeout fails unless left, the time an attempt had when it reached
// the server, is its whole timeout less what loopback and scheduling take.
func wholeTimeout(t *testing.T, what string, left time.Duration) {
	t.Helper()
	if left > callStartTimeout || left < callStartTimeout-callStartWait/2 {
		t.Errorf("%s reached the server with %v left, want its whole timeout %v (less a little), "+
			"not the timeout counted from the call's start (%v less)", what, left, callStartTimeout, callStartWait)
	}
}

// The first attempt of a call with a deadline gets its timeout counted
// from the call's start; a retry after a failed attempt gets its own.
func TestCallStartReadingServesTheFirstAttemptOnly(t *testing.T) {
	atkNoLeak(t)
	s := &callStartServer{first: func(ctx context.Context, _ server.Call) error {
		if err := server.Wait(ctx, callStartWait); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "the first attempt fails late")
	}}
	_, cc := startFault(t, s.behaviour)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Bulkhead, p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		m := atkMethod(p, atkGetStock)
		m.Timeout, m.Hedging, m.Bulkhead, m.Breaker = callStartTimeout, nil, nil, nil
		m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Multiplier: 1, RetryableCodes: policy.CodeSet(1 << codes.Unavailable)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatalf("GetStock: %v, want the retry's answer", err)
	}
	left := s.arrivals()
	if len(left) != 2 {
		t.Fatalf("the server saw %d attempts, want 2", len(left))
	}
	wholeTimeout(t, "the first attempt", left[0])
	wholeTimeout(t, "the retry, sent after a first attempt of "+callStartWait.String(), left[1])
}

// A call that waited for a bulkhead's permit gets its whole timeout.
func TestCallStartReadingIsNotReusedAfterABulkheadWait(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	s := &callStartServer{first: atkHold(release)}
	_, cc := startFault(t, s.behaviour)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Timeout, m.Hedging, m.Bulkhead, m.Breaker, m.Retry = callStartTimeout, nil, nil, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		first <- err
	}()
	for len(s.arrivals()) == 0 {
		time.Sleep(time.Millisecond)
	}
	go func() { time.Sleep(callStartWait); close(release) }()
	// This call finds the permit taken and waits for it.
	if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "pear"}); err != nil {
		t.Fatalf("the second GetStock: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first GetStock: %v", err)
	}
	left := s.arrivals()
	if len(left) != 2 {
		t.Fatalf("the server saw %d calls, want 2", len(left))
	}
	wholeTimeout(t, "the call that waited "+callStartWait.String()+" for the permit", left[1])
}

// A call that waited for a rate limit's token gets its whole timeout.
func TestCallStartReadingIsNotReusedAfterARateLimitWait(t *testing.T) {
	atkNoLeak(t)
	s := &callStartServer{}
	_, cc := startFault(t, s.behaviour)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Bulkhead, p.Breaker, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil, nil
		// One token, the next 200 ms later.
		p.RateLimit = &policy.RateLimit{RequestsPerSecond: float64(time.Second / callStartWait), Burst: 1, MaxWait: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Timeout, m.Hedging, m.Bulkhead, m.Breaker, m.Retry = callStartTimeout, nil, nil, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 2 {
		if _, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatalf("GetStock %d: %v", i+1, err)
		}
	}
	left := s.arrivals()
	if len(left) != 2 {
		t.Fatalf("the server saw %d calls, want 2", len(left))
	}
	wholeTimeout(t, "the first call", left[0])
	wholeTimeout(t, "the call that waited for its token", left[1])
}
