package runtime_test

// Attack on "a drop (RESOURCE_EXHAUSTED, …) halves the limit" and the
// throttler's accepts, with a message too large for a size limit: a
// response that grew past the client's receive limit (4 MiB by default;
// gRPC answers RESOURCE_EXHAUSTED "grpc: received message larger than
// max"), a request past its send limit (never sent), or past the server's
// receive limit (the server answers with the same words). None says the
// dependency is overloaded: one caller's oversized message may not
// collapse the adaptive limit, nor have the throttler refuse every other
// call towards a healthy dependency.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18TooLarge are the three ways a GetStock call meets a size limit: the
// options for the call, and whether the server sees it.
// The server's receive limit is 128 bytes (r18ServeSmall); the answer
// echoes the request's sku.
var r18TooLarge = []struct {
	name    string
	req     *inventoryv1.GetStockRequest
	opts    []grpc.CallOption
	reaches bool
}{
	{"response past the client's receive limit", &inventoryv1.GetStockRequest{Sku: strings.Repeat("s", 100)},
		[]grpc.CallOption{grpc.MaxCallRecvMsgSize(64)}, true},
	{"request past the client's send limit", &inventoryv1.GetStockRequest{Sku: strings.Repeat("s", 100)},
		[]grpc.CallOption{grpc.MaxCallSendMsgSize(64)}, false},
	{"request past the server's receive limit", &inventoryv1.GetStockRequest{Sku: strings.Repeat("s", 200)}, nil, false},
}

func r18ServeSmall(t *testing.T, opts ...grpc.DialOption) (*faultserver.Server, *grpc.ClientConn) {
	t.Helper()
	fs, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{grpc.MaxRecvMsgSize(128)}, opts...)
	// Connected before the first call, so that a loaded machine's slow
	// connection set-up is not taken out of that call's attempt timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cc.Connect()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if !cc.WaitForStateChange(ctx, st) {
			t.Fatalf("the connection to the small-message server is %v after 5s, want READY", st)
		}
	}
	return fs, cc
}

func TestAttackR18MessageTooLargeDoesNotCollapseTheAdaptiveLimit(t *testing.T) {
	for _, tc := range r18TooLarge {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			fs, cc := r18ServeSmall(t)
			reg := prometheus.NewRegistry()
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}},
				func(p *policy.Service) {
					p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, InitialLimit: 8, MaxLimit: 8}
					atkMethod(p, atkGetStock).Retry = nil
				})
			for i := range 8 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := c.GetStock(ctx, tc.req, tc.opts...)
				cancel()
				if status.Code(err) != codes.ResourceExhausted || errors.Is(err, runtime.ErrConcurrencyLimited) {
					t.Fatalf("call %d: %v, want gRPC's RESOURCE_EXHAUSTED for the size", i+1, err)
				}
			}
			if l := gaugeValue(t, reg, "resilient_client_adaptive_limit"); l != 8 {
				t.Errorf("the adaptive limit is %v after 8 oversized messages, want 8: a size limit is no overload", l)
			}
			want := 0
			if tc.reaches {
				want = 8
			}
			if n := fs.Calls(atkGetStock); n != want {
				t.Errorf("the server handled %d calls, want %d", n, want)
			}
		})
	}
}

func TestAttackR18MessageTooLargeDoesNotThrottleTheOtherCalls(t *testing.T) {
	for _, tc := range r18TooLarge {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			fs, cc := r18ServeSmall(t)
			c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
				p.ClientThrottle = &policy.Throttle{Window: time.Minute}
				atkMethod(p, atkGetStock).Retry = nil
			})
			for range 40 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = c.GetStock(ctx, tc.req, tc.opts...)
				cancel()
			}
			// The dependency is healthy: ordinary calls go through, none
			// refused locally.
			before := fs.Calls(atkGetStock)
			for i := range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
				cancel()
				if errors.Is(err, runtime.ErrThrottled) {
					t.Fatalf("ordinary call %d refused by the throttler after 40 oversized messages: %v", i+1, err)
				}
				if err != nil {
					t.Fatalf("ordinary call %d: %v", i+1, err)
				}
			}
			if n := fs.Calls(atkGetStock) - before; n != 20 {
				t.Errorf("the server saw %d ordinary calls, want 20", n)
			}
		})
	}
}

// The breaker, where RESOURCE_EXHAUSTED is listed among its failure codes
// (a server's load shedding), judges a message past a size limit as
// nothing, for unary calls and streams alike: it is not the dependency
// shedding load.
func TestAttackR18MessageTooLargeDoesNotOpenTheBreaker(t *testing.T) {
	atkNoLeak(t)
	fs, cc := r18ServeSmall(t)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 1
		p.Breaker.FailureCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted)
		atkMethod(p, atkGetStock).Retry = nil
	})
	rt := c.Runtime()
	for _, tc := range r18TooLarge {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.GetStock(ctx, tc.req, tc.opts...)
		cancel()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", tc.name, err)
		}
		atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, tc.name+": the breaker is %v, want closed")
	}
	// A stream whose messages are past the client's receive limit.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: strings.Repeat("s", 100)}, grpc.MaxCallRecvMsgSize(64))
	if err != nil {
		t.Fatalf("opening the stream: %v", err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Recv of a message past the limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	atkWantBreaker(t, rt, atkGetStock, runtime.StateClosed, "after the stream: the breaker is %v, want closed")
	atkWantNoPermits(t, rt, atkWatchStock, "after the stream's RESOURCE_EXHAUSTED")
	// And the breaker still judges: a real failure opens it.
	fs.SetBehaviour(server.Fail(codes.ResourceExhausted))
	_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	atkWantBreaker(t, rt, atkGetStock, runtime.StateOpen, "after the server shed a call: the breaker is %v, want open")
}

// RESOURCE_EXHAUSTED listed as retryable (a server's load shedding, with
// its pushback): a message past a size limit is not retried, nor hedged
// again. It fails the same way every time, and for a response past the
// client's receive limit the server does the work and sends it again for
// each attempt.
func TestAttackR18MessageTooLargeIsNotRetried(t *testing.T) {
	for _, hedge := range []bool{false, true} {
		for _, tc := range r18TooLarge {
			name := "retried: " + tc.name
			if hedge {
				name = "hedged: " + tc.name
			}
			t.Run(name, func(t *testing.T) {
				atkNoLeak(t)
				fs, cc := r18ServeSmall(t)
				var seen atomic.Int32 // attempts that left the client
				counting := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
					cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
					seen.Add(1)
					return invoker(ctx, method, req, reply, cc, opts...)
				})
				cc = dialFault(t, fs.Addr(), counting)
				c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
					p.Breaker = nil
					m := atkMethod(p, atkGetStock)
					codes := policy.CodesOf(codes.Unavailable, codes.ResourceExhausted)
					m.Retry.RetryableCodes = codes
					m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Millisecond, time.Millisecond
					if hedge {
						m.Retry = nil
						m.Hedging = &policy.Hedging{Delay: 200 * time.Millisecond, MaxCopies: 3, NonFatalCodes: codes}
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := c.GetStock(ctx, tc.req, tc.opts...)
				if status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("%v, want RESOURCE_EXHAUSTED", err)
				}
				if n := seen.Load(); n != 1 {
					t.Errorf("%d attempts, want 1: a size limit fails every attempt alike", n)
				}
				want := 0
				if tc.reaches {
					want = 1
				}
				if n := fs.Calls(atkGetStock); n != want {
					t.Errorf("the server handled %d calls, want %d", n, want)
				}
			})
		}
	}
}
