package runtime_test

// Attacks on the caller's ownership of its request. Once a unary Call has
// returned, the call is over: the caller may reuse or change its request
// message (for the next call, say). No attempt of the call may read it
// after that: not a hedged copy that lost (still marshalling it in gRPC,
// or not yet started), not a retry's attempt cut by its own timeout. A
// read that races with the caller's write is a data race (-race reports
// it) and may send the server a mix of the old and the new request under
// the old call's idempotency key.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// callHeader names the call an attempt belongs to, as an idempotency key
// would: the caller sets it, every attempt and copy carries it.
const callHeader = "x-call"

// seenRequests records, per call, the skus the server received GetStock
// with: a call with two skus is a wrong request under the call's key.
// first, if not nil, treats the first arrival of each call (the nth call
// seen); later arrivals answer at once.
type seenRequests struct {
	first func(ctx context.Context, n int) error
	mu    sync.Mutex
	byKey map[string]map[string]int
	n     int
}

func (s *seenRequests) interceptor() grpc.ServerOption {
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*inventoryv1.GetStockRequest); ok {
			md, _ := metadata.FromIncomingContext(ctx)
			key := strings.Join(md.Get(callHeader), ",")
			s.mu.Lock()
			first := s.byKey[key] == nil
			if first {
				s.byKey[key] = map[string]int{}
				s.n++
			}
			s.byKey[key][r.GetSku()]++
			n := s.n
			s.mu.Unlock()
			if first && s.first != nil {
				if err := s.first(ctx, n); err != nil {
					return nil, err
				}
			}
		}
		return h(ctx, req)
	})
}

// check fails the test unless every call the server saw came with one
// sku, and returns the number of calls and of requests received.
func (s *seenRequests) check(t *testing.T) (calls, requests int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, skus := range s.byKey {
		for _, n := range skus {
			requests += n
		}
		if key == "" {
			t.Errorf("the server received %d requests without %s", len(skus), callHeader)
		}
		if len(skus) != 1 {
			names := make([]string, 0, len(skus))
			for sku, n := range skus {
				names = append(names, fmt.Sprintf("%.12s… ×%d", sku, n))
			}
			t.Errorf("key %s reached the server with %d different requests: %v", key, len(skus), names)
		}
	}
	return len(s.byKey), requests
}

// requestsOf returns how many requests of the call sent with key the
// server received.
func (s *seenRequests) requestsOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.byKey[key] {
		n += c
	}
	return n
}

// attemptsRunning counts the attempts whose invoker (gRPC, which marshals
// the request) has not returned.
func attemptsRunning(n *atomic.Int32) grpc.DialOption {
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		n.Add(1)
		defer n.Add(-1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

// pad makes the request large enough that marshalling it takes a while.
var pad = strings.Repeat("x", 16<<10)

func TestHedgedCallReadsNoRequestAfterItReturned(t *testing.T) {
	atkNoLeak(t)
	// The first copy of each call waits one of a few times around the
	// hedging delay of 1 ms, so that the second copy sometimes goes just as
	// the first answers.
	slow := func(ctx context.Context, n int) error {
		return server.Wait(ctx, time.Duration(n%6)*400*time.Microsecond)
	}
	seen := &seenRequests{first: slow, byKey: map[string]map[string]int{}}
	var running atomic.Int32
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{seen.interceptor()}, attemptsRunning(&running))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Hedging = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})

	const calls = 100
	req := &inventoryv1.GetStockRequest{}
	stillRunning := 0
	for i := range calls {
		req.Sku = fmt.Sprintf("call-%d-%s", i, pad)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, callHeader, fmt.Sprint(i))
		_, err := c.GetStock(ctx, req)
		cancel()
		if n := running.Load(); n != 0 {
			stillRunning++
		}
		// The call is over: the caller reuses its request at once.
		req.Sku = "changed after the call returned " + pad
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if stillRunning != 0 {
		t.Errorf("%d of %d calls returned while a copy they sent was still in gRPC, which may still read the request", stillRunning, calls)
	}
	atkWaitFor(t, "every copy ends", func() bool { return running.Load() == 0 })
	keys, received := seen.check(t)
	if keys != calls {
		t.Errorf("the server saw %d calls, want %d", keys, calls)
	}
	if received <= calls {
		t.Errorf("the server received %d requests for %d calls: no call was hedged, which proves nothing", received, calls)
	}
	t.Logf("%d requests for %d calls", received, calls)
}

// A retried call's attempt cut by its own timeout has returned from gRPC
// before the next attempt goes (attempts run one after another), and the
// last before Call returns.
func TestRetriedCallReadsNoRequestAfterItReturned(t *testing.T) {
	atkNoLeak(t)
	// The first attempt of each call hangs until its timeout.
	hang := func(ctx context.Context, _ int) error { return server.Hang(ctx, server.Call{}) }
	seen := &seenRequests{first: hang, byKey: map[string]map[string]int{}}
	var running atomic.Int32
	_, cc := startFaultWith(t, server.Healthy, []grpc.ServerOption{seen.interceptor()}, attemptsRunning(&running))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Timeout = 10 * time.Millisecond
		m.Retry.MaxAttempts = 3
		m.Retry.InitialBackoff, m.Retry.MaxBackoff = time.Microsecond, time.Microsecond
		m.Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
	})
	const calls = 40
	req := &inventoryv1.GetStockRequest{}
	stillRunning, failed := 0, 0
	var answered []string // the keys of the calls that got an answer
	for i := range calls {
		req.Sku = fmt.Sprintf("call-%d-%s", i, pad)
		_, err := c.GetStock(metadata.AppendToOutgoingContext(context.Background(), callHeader, fmt.Sprint(i)), req)
		if err == nil {
			answered = append(answered, fmt.Sprint(i))
		}
		if running.Load() != 0 {
			stillRunning++
		}
		req.Sku = "changed after the call returned " + pad
		// A loaded machine may have every attempt of a call cut, some
		// before they reach the server: what is under test holds however
		// the call ends.
		if err != nil {
			if !errors.Is(err, runtime.ErrRetriesExhausted) {
				t.Fatalf("call %d: %v", i, err)
			}
			failed++
		}
	}
	if failed == calls {
		t.Fatalf("every call failed, the last attempts cut by their timeout too: no answer to judge")
	}
	if stillRunning != 0 {
		t.Errorf("%d of %d calls returned while an attempt was still in gRPC", stillRunning, calls)
	}
	seen.check(t)
	for _, key := range answered {
		if n := seen.requestsOf(key); n < 2 {
			t.Errorf("call %s was answered after the server received %d of its requests, want at least 2: the first attempt, cut by its timeout, and the one that answered", key, n)
		}
	}
}

// A stream's request goes in SendMsg, which gRPC marshals before it
// returns: once WatchStock has returned the stream, its request is the
// caller's again.
func TestStreamReadsNoRequestAfterItOpened(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Healthy)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, nil)
	req := &inventoryv1.WatchStockRequest{}
	for i := range 30 {
		want := fmt.Sprintf("stream-%d-%s", i, pad)
		req.Sku = want
		st, err := c.WatchStock(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		req.Sku = "changed after the stream opened"
		got := 0
		for {
			r, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			if r.GetSku() != want {
				t.Fatalf("stream %d: the server answered for sku %.30q…, want the one sent", i, r.GetSku())
			}
			got++
		}
		if got != 3 {
			t.Fatalf("stream %d: %d updates, want 3", i, got)
		}
	}
}

// BenchmarkHedgedCallEnd measures a hedged call whose first copy answers
// at once (first=answers: the happy path, no second copy), and one whose
// first copy hangs until it is cancelled while the second answers
// (first=hangs: the call ends with a loser to cut), against calls that do
// nothing, so that the runtime's own cost shows. answer-to-return-ns is
// the time from the answering copy's return to the caller's.
func BenchmarkHedgedCallEnd(b *testing.B) {
	for _, bc := range []struct {
		name     string
		delay    time.Duration
		hang     bool
		deadline bool // the caller's context has a deadline (an hour away)
	}{
		{"first=answers", 500 * time.Millisecond, false, false},
		{"first=hangs", 20 * time.Microsecond, true, false},
		{"first=answers/deadline", 500 * time.Millisecond, false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt, err := runtime.NewClient(&policy.Service{
				Name:   inventoryService,
				Budget: &policy.Budget{Ratio: 1, MinRetries: 1 << 30, Window: time.Second},
				Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second,
					Hedging: hedging(bc.delay, 2)}},
			})
			if err != nil {
				b.Fatal(err)
			}
			m := rt.Method(0)
			var first atomic.Bool
			var answered time.Time // written by the answering copy, read once the call returned
			call := func(ctx context.Context, _ *inventoryv1.GetStockRequest, _ ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
				if bc.hang && first.CompareAndSwap(true, false) {
					<-ctx.Done()
					return nil, status.FromContextError(ctx.Err()).Err()
				}
				answered = time.Now()
				return &inventoryv1.GetStockResponse{}, nil
			}
			req := &inventoryv1.GetStockRequest{Sku: "a"}
			ctx := context.Background()
			if bc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			var after time.Duration
			b.ReportAllocs()
			for b.Loop() {
				first.Store(true)
				if _, err := runtime.Unary(ctx, m, "", req, nil, call, nil); err != nil {
					b.Fatal(err)
				}
				after += time.Since(answered)
			}
			b.ReportMetric(float64(after.Nanoseconds())/float64(b.N), "answer-to-return-ns")
		})
	}
}

// BenchmarkHedgedCallEndLoopback is BenchmarkHedgedCallEnd's first=hangs
// through gRPC to a server on loopback: the odd copies (each call's first)
// hang until cancelled, the even ones answer. answer-to-return-ns is the
// time from the answering copy's invoker returning to the caller's
// return, which includes cutting the loser.
func BenchmarkHedgedCallEndLoopback(b *testing.B) {
	srv, err := server.Start("127.0.0.1:0", func(ctx context.Context, c server.Call) error {
		if c.N%2 == 1 {
			return server.Hang(ctx, c)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	var answered atomic.Int64 // the answering copy's invoker return, in ns since start
	start := time.Now()
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil {
				answered.Store(int64(time.Since(start)))
			}
			return err
		}))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	rt, err := runtime.NewClient(&policy.Service{
		Name:   inventoryService,
		Budget: &policy.Budget{Ratio: 1, MinRetries: 1 << 30, Window: time.Second},
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second,
			Hedging: hedging(500*time.Microsecond, 2)}},
	})
	if err != nil {
		b.Fatal(err)
	}
	m := rt.Method(0)
	plain := inventoryv1.NewInventoryServiceClient(cc)
	req := &inventoryv1.GetStockRequest{Sku: "a"}
	ctx := context.Background()
	var after time.Duration
	b.ReportAllocs()
	for b.Loop() {
		if _, err := runtime.Unary(ctx, m, "", req, nil, plain.GetStock, nil); err != nil {
			b.Fatal(err)
		}
		after += time.Since(start) - time.Duration(answered.Load())
	}
	b.ReportMetric(float64(after.Nanoseconds())/float64(b.N), "answer-to-return-ns")
}

// The same when the caller's deadline ends the call with every copy in
// flight, and when the caller cancels: the copies are cut by the caller's
// context and have ended when Call returns.
func TestHedgedCallEndedByItsContextReadsNoRequestAfterItReturned(t *testing.T) {
	atkNoLeak(t)
	var running atomic.Int32
	_, cc := startFault(t, server.Hang, attemptsRunning(&running))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Hedging = &policy.Hedging{Delay: time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	req := &inventoryv1.GetStockRequest{}
	for i := range 40 {
		req.Sku = fmt.Sprintf("call-%d-%s", i, pad)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i%4)*time.Millisecond)
		if i%2 == 1 {
			time.AfterFunc(time.Duration(i%3)*time.Millisecond, cancel)
		}
		_, err := c.GetStock(ctx, req)
		n := running.Load()
		req.Sku = "changed after the call returned " + pad
		cancel()
		if code := status.Code(err); code != codes.DeadlineExceeded && code != codes.Canceled {
			t.Fatalf("call %d: %v, want DEADLINE_EXCEEDED or CANCELLED", i, err)
		}
		if n != 0 {
			t.Fatalf("call %d returned with %d copies still in gRPC", i, n)
		}
	}
}

// The wait for the losers is bounded by their honouring their context, as
// an unhedged call is: a client interceptor that ignores its context (here
// the first copy's, which sleeps 200 ms before it calls gRPC) holds the
// call until it returns, though the second copy answered at once; and it
// has returned when the call does.
func TestHedgedCallWaitsForALoserWhoseInterceptorIgnoresItsContext(t *testing.T) {
	atkNoLeak(t)
	const stall = 200 * time.Millisecond
	var copies, running atomic.Int32
	stalls := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		running.Add(1)
		defer running.Add(-1)
		if copies.Add(1) == 1 {
			time.Sleep(stall) // deaf to ctx
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	srv, cc := startFaultWith(t, server.Healthy, nil, stalls)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker = nil
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1e6, Window: time.Second}
		m := atkMethod(p, atkGetStock)
		m.Retry = nil
		m.Timeout = 5 * time.Second
		m.Hedging = &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 2}
	})
	begin := time.Now()
	if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
		t.Fatalf("call: %v", err)
	}
	took := time.Since(begin)
	if n := running.Load(); n != 0 {
		t.Errorf("the call returned with %d copies still in their interceptor", n)
	}
	if took < stall {
		t.Errorf("the call returned after %v, before its stalled loser's %v", took, stall)
	}
	if n := copies.Load(); n != 2 {
		t.Errorf("%d copies sent, want 2", n)
	}
	if n := srv.Calls(getStock); n != 1 {
		t.Errorf("server saw %d calls, want 1: the stalled copy calls gRPC with its context cut", n)
	}
}
