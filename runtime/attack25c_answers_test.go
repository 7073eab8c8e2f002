package runtime_test

// Attacks on where the fallback and a stale answer stand in (README,
// "Fallback", "Cache"): for each code a server can answer with, the
// fallback runs, and a stale answer is served, exactly where the call
// failed on the dependency's side; never for an answer (the README's
// list: INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
// FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED, UNAUTHENTICATED), nor
// for ABORTED (a conflict) or a CANCELLED the server sent, which the
// runtime takes for answers too.

import (
	"context"
	"errors"
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

func TestAttack25cFallbackAndStaleForEachServerCode(t *testing.T) {
	atkNoLeak(t)
	standsIn := map[codes.Code]bool{
		codes.Unknown: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true,
		codes.Internal: true, codes.Unavailable: true, codes.DataLoss: true,
	}
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	clock := newAtkClock()
	var fallbacks atomic.Int32
	fallback := func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
		fallbacks.Add(1)
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	}
	cached := atk25cCachedInventory(t, cc, clock, nil, fallback)
	uncached := atk25cUncached(t, cc, fallback)
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		code := c
		t.Run(code.String(), func(t *testing.T) {
			sku := "sku-" + code.String()
			fs.SetBehaviour(server.Healthy)
			if r, err := cached.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: sku}); err != nil || r.GetUnits() != 42 {
				t.Fatalf("keeping an answer: %v %v", r, err)
			}
			clock.Advance(2 * time.Second) // stale, not fresh
			fs.SetBehaviour(func(context.Context, server.Call) error { return status.Error(code, "the server's "+code.String()) })

			before := fallbacks.Load()
			r, err := uncached.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: sku})
			ran := fallbacks.Load() != before
			if ran != standsIn[code] {
				t.Errorf("server %v: the fallback ran %v, want %v (got %v %v)", code, ran, standsIn[code], r, err)
			}
			if !ran && status.Code(err) != code {
				t.Errorf("server %v: the caller got %v, want the server's code", code, err)
			}

			before = fallbacks.Load()
			r, err = cached.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: sku})
			stale := err == nil && r.GetUnits() == 42
			if stale != standsIn[code] {
				t.Errorf("server %v: stale answer served %v, want %v (got %v %v)", code, stale, standsIn[code], r, err)
			}
			if fallbacks.Load() != before {
				t.Errorf("server %v: the fallback ran beside the cache (got %v %v): a stale answer stands in first, and where it may not, neither may the fallback", code, r, err)
			}
		})
	}
	// A method that retries ABORTED still takes its last ABORTED for an
	// answer: retried, then no fallback.
	retrying, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: fallback,
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			withoutCacheAndRateLimit(p)
			p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead = nil, nil, nil, nil
			m := atkMethod(p, atkGetStock)
			m.Retry.MaxAttempts, m.Retry.InitialBackoff, m.Retry.MaxBackoff = 2, time.Millisecond, time.Millisecond
			m.Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.Aborted)
			m.Timeout, m.OverallTimeout = 5*time.Second, 0
		})}})
	if err != nil {
		t.Fatal(err)
	}
	fs.SetBehaviour(func(context.Context, server.Call) error { return status.Error(codes.Aborted, "conflict") })
	before, calls := fallbacks.Load(), fs.Calls(atkGetStock)
	if _, err := retrying.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "x"}); status.Code(err) != codes.Aborted {
		t.Errorf("retried ABORTED: got %v, want ABORTED", err)
	}
	if n := fs.Calls(atkGetStock) - calls; n != 2 {
		t.Errorf("retried ABORTED: the server saw %d calls, want 2", n)
	}
	if fallbacks.Load() != before {
		t.Errorf("retried ABORTED: the fallback ran")
	}
}

// atk25cUncached is the inventory client without cache, rate limit,
// breaker or retry, with fallback as GetStock's fallback.
func atk25cUncached(t *testing.T, cc grpc.ClientConnInterface,
	fallback runtime.Fallback[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		GetStockFallback: fallback,
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			withoutCacheAndRateLimit(p)
			p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead = nil, nil, nil, nil
			m := atkMethod(p, atkGetStock)
			m.Retry, m.Timeout, m.OverallTimeout = nil, 5*time.Second, 0
		})}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAttack25cFallbackOnceWhateverTheAttempts: a call retried three
// times, and a call hedged with three copies, every attempt failing: the
// server saw each attempt, and the fallback ran once for the call, with
// the call's final error.
func TestAttack25cFallbackOnceWhateverTheAttempts(t *testing.T) {
	atkNoLeak(t)
	for _, tc := range []struct {
		name string
		edit func(m *policy.Method)
	}{
		{"retried", func(m *policy.Method) {
			m.Retry.MaxAttempts, m.Retry.InitialBackoff, m.Retry.MaxBackoff = 3, time.Millisecond, time.Millisecond
			m.Timeout, m.OverallTimeout = 5*time.Second, 0
		}},
		{"hedged", func(m *policy.Method) {
			m.Retry = nil
			m.Timeout, m.OverallTimeout = 2*time.Second, 0
			m.Hedging = &policy.Hedging{Delay: 20 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, cc := startFault(t, func(context.Context, server.Call) error { return status.Error(codes.Unavailable, "down") })
			readyConn(t, cc)
			var ran atomic.Int32
			var got error
			c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
				GetStockFallback: func(_ context.Context, _ *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
					ran.Add(1)
					got = err
					return &inventoryv1.GetStockResponse{Units: -1}, nil
				},
				Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
					withoutCacheAndRateLimit(p)
					p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead = nil, nil, nil, nil
					tc.edit(atkMethod(p, atkGetStock))
				})}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
			if err != nil || r.GetUnits() != -1 {
				t.Fatalf("got %v %v, want the fallback's answer", r, err)
			}
			if n := fs.Calls(atkGetStock); n != 3 {
				t.Errorf("the server saw %d attempts, want 3", n)
			}
			if n := ran.Load(); n != 1 {
				t.Errorf("the fallback ran %d times, want once", n)
			}
			if !errors.Is(got, runtime.ErrRetriesExhausted) || status.Code(got) != codes.Unavailable {
				t.Errorf("the fallback got %v, want the final UNAVAILABLE after every attempt", got)
			}
		})
	}
}
