package runtime_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The promises of the README's "Semantics" under the faults they exist
// for: every way a stream ends, a timed-out stream, a context already over,
// a panicking call, quiet long-lived streams. Each test runs against a real
// gRPC server on loopback and checks what it saw.

const (
	uploadService = "resilient.test.UploadService"
	uploadPut     = "/resilient.test.UploadService/Put"
)

// uploads is a client-streaming service on loopback: Put receives strings
// until the client closes, and answers how many it got.
type uploads struct {
	streams  atomic.Int64 // Put streams the handler saw
	messages atomic.Int64
}

var putDesc = grpc.StreamDesc{StreamName: "Put", ClientStreams: true}

func startUploads(t *testing.T) (*uploads, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &uploads{}
	gs := grpc.NewServer()
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: uploadService,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Put", ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
			u.streams.Add(1)
			n := int64(0)
			for {
				var m wrapperspb.StringValue
				err := st.RecvMsg(&m)
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				if m.GetValue() == "reject" {
					return status.Error(codes.InvalidArgument, "rejected at the first message")
				}
				n++
			}
			u.messages.Add(n)
			return st.SendMsg(wrapperspb.Int64(n))
		}}},
	}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	cc := dialFault(t, lis.Addr().String())
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
		<-done
	})
	return u, cc
}

// upload sends n strings through a Put stream and returns the answer, as
// the generated CloseAndRecv does.
func upload(ctx context.Context, conn grpc.ClientConnInterface, n int) (int64, error) {
	cs, err := conn.NewStream(ctx, &putDesc, uploadPut)
	if err != nil {
		return 0, err
	}
	st := &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.Int64Value]{ClientStream: cs}
	for range n {
		if err := st.Send(wrapperspb.String("x")); err != nil {
			return 0, err
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		return 0, err
	}
	return resp.GetValue(), nil
}

// byMethod answers each method with its own behaviour, Healthy for the
// others.
func byMethod(bs map[string]server.Behaviour) server.Behaviour {
	return func(ctx context.Context, c server.Call) error {
		if b := bs[c.Method]; b != nil {
			return b(ctx, c)
		}
		return nil
	}
}

func wantBreaker(t *testing.T, rt *runtime.Client, method string, want runtime.State) {
	t.Helper()
	if s, _ := rt.BreakerState(method); s != want {
		t.Fatalf("breaker %v, want %v", s, want)
	}
}

func wantPermits(t *testing.T, rt *runtime.Client, method string, want int) {
	t.Helper()
	if n, _ := rt.BulkheadInUse(method); n != want {
		t.Fatalf("%d permits taken, want %d", n, want)
	}
}

// badSku is not UTF-8: a proto3 string field holding it does not marshal,
// so the request of a stream never leaves the client.
const badSku = "\xff\xfe"

// watchPolicy is WatchStock with the example's annotations (its own
// bulkhead of 4 permits, 60 s) and, when breaker is not nil, a breaker of
// its own, which only streams go through.
func watchPolicy(breaker *policy.Breaker) policy.Service {
	return policy.Service{Methods: []policy.Method{{Name: watchStock, Kind: policy.KindServerStreaming,
		Timeout: 60 * time.Second, Bulkhead: &policy.Bulkhead{Permits: 4}, Breaker: breaker}}}
}

func TestStreamsReturnWhatTheyHoldOnEveryEnding(t *testing.T) {
	t.Run("a client stream's response", func(t *testing.T) {
		u, cc := startUploads(t)
		rt, err := runtime.NewClient(&policy.Service{Name: uploadService, Bulkhead: &policy.Bulkhead{Permits: 2},
			Breaker: breakerPolicy(2, 1),
			Methods: []policy.Method{{Name: uploadPut, Kind: policy.KindClientStreaming}}})
		if err != nil {
			t.Fatal(err)
		}
		conn := rt.Conn(cc)
		// context.Background: nothing but the response can free the permits.
		for i := range 5 {
			got, err := upload(context.Background(), conn, i+1)
			if err != nil {
				t.Fatalf("upload %d: %v; with 2 permits, completed uploads must not lock the bulkhead", i, err)
			}
			if got != int64(i+1) {
				t.Fatalf("upload %d answered %d, want %d", i, got, i+1)
			}
			wantPermits(t, rt, uploadPut, 0)
		}
		if got := u.streams.Load(); got != 5 {
			t.Errorf("server saw %d uploads, want 5", got)
		}
	})

	t.Run("a client stream the server ends early, abandoned at Send's io.EOF", func(t *testing.T) {
		u, cc := startUploads(t)
		rt, err := runtime.NewClient(&policy.Service{Name: uploadService, Bulkhead: &policy.Bulkhead{Permits: 2},
			Methods: []policy.Method{{Name: uploadPut, Kind: policy.KindClientStreaming}}})
		if err != nil {
			t.Fatal(err)
		}
		conn := rt.Conn(cc)
		for i := range 4 {
			cs, err := conn.NewStream(context.Background(), &putDesc, uploadPut)
			if err != nil {
				t.Fatalf("upload %d: %v; abandoned uploads must not lock the bulkhead", i, err)
			}
			err = cs.SendMsg(wrapperspb.String("reject"))
			deadline := time.Now().Add(5 * time.Second)
			for err == nil && time.Now().Before(deadline) {
				err = cs.SendMsg(wrapperspb.String("x"))
			}
			if err != io.EOF {
				t.Fatalf("send: %v, want io.EOF once the server ended the stream", err)
			}
			// The caller returns on the error, as many do, without reading
			// the status and with a context that never ends.
			wantPermits(t, rt, uploadPut, 0)
		}
		if got := u.streams.Load(); got != 4 {
			t.Errorf("server saw %d uploads, want 4", got)
		}
	})

	t.Run("a failed first send", func(t *testing.T) {
		srv, cc := start(t, server.Healthy)
		// The generated client under the annotated policy: 4 permits, 60 s.
		client := invClient(t, cc, nil, nil)
		rt := client.Runtime()
		// More bad requests than permits: none may keep one.
		for i := range 6 {
			st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: badSku})
			if st != nil || status.Code(err) != codes.Internal {
				t.Fatalf("bad request %d: %v, %v; want no stream and INTERNAL", i, st, err)
			}
			wantPermits(t, rt, watchStock, 0)
		}
		st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			t.Fatalf("a good request after the bad ones: %v", err)
		}
		drain(t, st, 3)
		if got := srv.Calls(watchStock); got != 1 {
			t.Errorf("server saw %d WatchStock requests, want 1: the bad ones never left", got)
		}
	})

	t.Run("a failed first send of a half-open probe", func(t *testing.T) {
		srv, cc := start(t, server.Fail(codes.Unavailable))
		clock := newFakeClock()
		rt := inventory(t, watchPolicy(breakerPolicy(2, 1)), runtime.WithClock(clock))
		client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
		for range 2 {
			st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
				t.Fatalf("recv: %v, want UNAVAILABLE", err)
			}
		}
		wantBreaker(t, rt, watchStock, runtime.StateOpen)
		srv.SetBehaviour(server.Healthy)
		clock.Advance(10 * time.Second)
		// The only probe's request does not marshal: the probe says nothing
		// and its place is free at once.
		if _, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: badSku}); status.Code(err) != codes.Internal {
			t.Fatalf("bad probe: %v, want INTERNAL", err)
		}
		wantBreaker(t, rt, watchStock, runtime.StateHalfOpen)
		st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			t.Fatalf("the next probe: %v, want it admitted", err)
		}
		drain(t, st, 3)
		wantBreaker(t, rt, watchStock, runtime.StateClosed)
		wantPermits(t, rt, watchStock, 0)
		if got := srv.Calls(watchStock); got != 3 {
			t.Errorf("server saw %d streams, want 3", got)
		}
	})

	t.Run("io.EOF, an error, the caller's context, the stream's timeout", func(t *testing.T) {
		srv, cc := start(t, nil)
		rt := inventory(t, watchPolicy(nil))
		client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
		watch := func(ctx context.Context) inventoryv1.InventoryService_WatchStockClient {
			t.Helper()
			st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		drain(t, watch(context.Background()), 3) // io.EOF
		wantPermits(t, rt, watchStock, 0)

		srv.SetBehaviour(server.Fail(codes.Unavailable))
		if _, err := watch(context.Background()).Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("recv: %v, want UNAVAILABLE", err)
		}
		wantPermits(t, rt, watchStock, 0)

		srv.SetBehaviour(server.Hang)
		ctx, cancel := context.WithCancel(context.Background())
		watch(ctx) // abandoned, unread
		eventually(t, "the server holds the stream", func() bool { return srv.Calls(watchStock) == 3 })
		wantPermits(t, rt, watchStock, 1)
		cancel()
		eventually(t, "the cancelled stream's permit is back", func() bool { n, _ := rt.BulkheadInUse(watchStock); return n == 0 })

		short := inventory(t, policy.Service{Methods: []policy.Method{{Name: watchStock, Kind: policy.KindServerStreaming,
			Timeout: 300 * time.Millisecond, Bulkhead: &policy.Bulkhead{Permits: 1}}}})
		if _, err := inventoryv1.NewInventoryServiceClient(short.Conn(cc)).WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
			t.Fatal(err)
		} // abandoned without cancelling: its timeout frees the permit
		eventually(t, "the server holds the stream", func() bool { return srv.Calls(watchStock) == 4 })
		wantPermits(t, short, watchStock, 1)
		eventually(t, "the timed-out stream's permit is back", func() bool { n, _ := short.BulkheadInUse(watchStock); return n == 0 })
		eventually(t, "the server saw both hung streams end", func() bool { return srv.Cancelled(watchStock) == 2 })
	})

	t.Run("a panic in the stream's codec or interceptor", func(t *testing.T) {
		srv, err := server.Start("127.0.0.1:0", server.Healthy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		var panicOpen, panicRecv atomic.Bool
		cc := dialFault(t, srv.Addr(), grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
			method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if panicOpen.Load() {
				panic("interceptor panicked")
			}
			cs, err := streamer(ctx, desc, cc, method, opts...)
			return &panickyStream{ClientStream: cs, panics: &panicRecv}, err
		}))
		clock := newFakeClock()
		rt := inventory(t, watchPolicy(breakerPolicy(2, 1)), runtime.WithClock(clock))
		client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))

		panicOpen.Store(true)
		wantPanic(t, "interceptor panicked", func() { _, _ = client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"}) })
		wantPermits(t, rt, watchStock, 0)
		panicOpen.Store(false)
		panicRecv.Store(true)
		st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			t.Fatal(err)
		}
		wantPermits(t, rt, watchStock, 1)
		wantPanic(t, "codec panicked", func() { _, _ = st.Recv() })
		wantPermits(t, rt, watchStock, 0)
		panicRecv.Store(false)
		for range 4 { // more than the permits: none was kept
			drain(t, watchOK(t, client), 3)
		}
		wantBreaker(t, rt, watchStock, runtime.StateClosed)
	})
}

// panickyStream panics in RecvMsg while panics is set, as a codec that
// panics on a message would.
type panickyStream struct {
	grpc.ClientStream
	panics *atomic.Bool
}

func (s *panickyStream) RecvMsg(m any) error {
	if s.panics.Load() {
		panic("codec panicked")
	}
	return s.ClientStream.RecvMsg(m)
}

func watchOK(t *testing.T, client inventoryv1.InventoryServiceClient) inventoryv1.InventoryService_WatchStockClient {
	t.Helper()
	st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// drain reads st to its end and checks it held want messages.
func drain(t *testing.T, st inventoryv1.InventoryService_WatchStockClient, want int) {
	t.Helper()
	got := 0
	for {
		_, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		got++
	}
	if got != want {
		t.Fatalf("received %d messages, want %d", got, want)
	}
}

// wantPanic runs f and checks that it panicked with want: the runtime lets
// a panic go on to the caller.
func wantPanic(t *testing.T, want any, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if got := recover(); got != want {
			t.Fatalf("panic %v, want %v", got, want)
		}
	}()
	f()
}

// TestAStreamThatTimesOutIsAFailure: a stream cut by its own timeout
// (400 ms) or by its caller's sooner deadline (200 ms) is a failure of
// the breaker's; two open it, and a half-open probe that times out opens
// it again. The times leave hundreds of ms for each stream to reach the
// hung server on a connection made beforehand (with 50 and 20 ms, at load
// 10 one never reached it).
func TestAStreamThatTimesOutIsAFailure(t *testing.T) {
	srv, cc := start(t, server.Hang)
	readyConn(t, cc)
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: watchStock, Kind: policy.KindServerStreaming,
		Timeout: 400 * time.Millisecond, Breaker: breakerPolicy(2, 1)}}}, runtime.WithClock(clock), runtime.WithRegisterer(reg))
	client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	timeout := func(ctx context.Context) {
		t.Helper()
		st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("recv: %v, want DEADLINE_EXCEEDED", err)
		}
	}
	// One ends at the stream's own timeout; the other at the caller's
	// deadline, sooner, and unread: its context ends it.
	timeout(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two hung streams open the breaker", func() bool { s, _ := rt.BreakerState(watchStock); return s == runtime.StateOpen })
	if _, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"}); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("%v, want ErrCircuitOpen", err)
	}
	wantMetric(t, reg, 2, "resilient_client_attempts_total", "method", "WatchStock", "code", "DEADLINE_EXCEEDED")

	// A probe that times out opens the breaker again; it does not close it.
	clock.Advance(10 * time.Second)
	timeout(context.Background())
	wantBreaker(t, rt, watchStock, runtime.StateOpen)
	wantMetric(t, reg, 3, "resilient_client_attempts_total", "method", "WatchStock", "code", "DEADLINE_EXCEEDED")
	if got := srv.Calls(watchStock); got != 3 {
		t.Errorf("server saw %d streams, want 3", got)
	}
}

func TestWhatNeverReachedTheDependencyCountsForNothing(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	dead := []struct {
		name string
		ctx  context.Context
		code codes.Code
	}{{"deadline passed", expired, codes.DeadlineExceeded}, {"cancelled", cancelled, codes.Canceled}}

	t.Run("calls and streams, closed and half-open", func(t *testing.T) {
		srv, cc := start(t, server.Healthy)
		clock := newFakeClock()
		reg := prometheus.NewRegistry()
		rt := inventory(t, policy.Service{
			Breaker:   breakerPolicy(5, 1),
			Bulkhead:  &policy.Bulkhead{Permits: 1},
			RateLimit: &policy.RateLimit{RequestsPerSecond: 0.001, Burst: 1},
			Methods: []policy.Method{
				{Name: getStock, Idempotent: true},
				{Name: watchStock, Kind: policy.KindServerStreaming, Timeout: time.Second},
			},
		}, runtime.WithClock(clock), runtime.WithRegisterer(reg))
		client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
		deadOnes := func() {
			t.Helper()
			for _, d := range dead {
				for range 20 {
					if _, err := callGetStock(d.ctx, rt, cc); status.Code(err) != d.code {
						t.Fatalf("%s call: %v, want %v", d.name, err, d.code)
					}
					if _, err := client.WatchStock(d.ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); status.Code(err) != d.code {
						t.Fatalf("%s stream: %v, want %v", d.name, err, d.code)
					}
				}
			}
		}
		deadOnes()
		wantBreaker(t, rt, getStock, runtime.StateClosed)
		wantPermits(t, rt, getStock, 0)
		// The one token of the bucket is still there for a live call.
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatalf("a live call after 80 dead ones: %v; it must find the token", err)
		}
		if got := srv.Calls(getStock) + srv.Calls(watchStock); got != 1 {
			t.Errorf("server saw %d calls, want 1", got)
		}
		wantMetric(t, reg, 1, "resilient_client_attempts_total", "method", "GetStock", "code", "OK")
		for _, series := range []string{"resilient_client_breaker_rejections_total", "resilient_client_bulkhead_rejections_total", "resilient_client_rate_limited_total"} {
			wantMetric(t, reg, 0, series, "method", "GetStock")
		}

		// Half-open: dead callers take no probe and cannot open it again.
		rt2 := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1), Methods: []policy.Method{
			{Name: getStock, Idempotent: true}, {Name: watchStock, Kind: policy.KindServerStreaming, Timeout: time.Second}}},
			runtime.WithClock(clock))
		client2 := inventoryv1.NewInventoryServiceClient(rt2.Conn(cc))
		srv.SetBehaviour(server.Fail(codes.Unavailable))
		for range 2 {
			_, _ = callGetStock(context.Background(), rt2, cc)
		}
		wantBreaker(t, rt2, getStock, runtime.StateOpen)
		srv.SetBehaviour(server.Healthy)
		clock.Advance(10 * time.Second)
		for _, d := range dead {
			if _, err := callGetStock(d.ctx, rt2, cc); status.Code(err) != d.code {
				t.Fatalf("%s call: %v, want %v", d.name, err, d.code)
			}
			if _, err := client2.WatchStock(d.ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); status.Code(err) != d.code {
				t.Fatalf("%s stream: %v, want %v", d.name, err, d.code)
			}
		}
		wantBreaker(t, rt2, getStock, runtime.StateHalfOpen)
		if _, err := callGetStock(context.Background(), rt2, cc); err != nil {
			t.Fatalf("the live probe: %v", err)
		}
		wantBreaker(t, rt2, getStock, runtime.StateClosed)
	})

	t.Run("no shared cached call, no fallback", func(t *testing.T) {
		srv, cc := start(t, server.Healthy)
		var fell atomic.Int32
		c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
			GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
				fell.Add(1)
				return &inventoryv1.GetStockResponse{}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dead {
			for range 20 {
				if _, err := c.GetStock(d.ctx, &inventoryv1.GetStockRequest{Sku: "apple"}); status.Code(err) != d.code {
					t.Fatalf("%s: %v, want %v", d.name, err, d.code)
				}
			}
		}
		if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatal(err)
		}
		if got := srv.Calls(getStock); got != 1 {
			t.Errorf("server saw %d calls, want 1: a dead caller starts no shared cached call", got)
		}
		if n := fell.Load(); n != 0 {
			t.Errorf("the fallback answered %d dead callers, want 0", n)
		}
	})

	t.Run("no budget request", func(t *testing.T) {
		srv, cc := start(t, server.Fail(codes.Unavailable))
		rt := inventory(t, policy.Service{
			Budget:  &policy.Budget{Ratio: 1, MinRetries: 0, Window: time.Minute},
			Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retryPolicy(5)}},
		})
		for _, d := range dead {
			for range 20 {
				_, _ = callGetStock(d.ctx, rt, cc)
			}
		}
		// With ratio 1 and no floor, one live request earns one retry; had
		// the 40 dead ones been counted, it would get all 4.
		if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrBudgetExhausted) {
			t.Fatalf("%v, want ErrBudgetExhausted", err)
		}
		if got := srv.Calls(getStock); got != 2 {
			t.Errorf("server saw %d attempts, want 2", got)
		}
	})

	t.Run("the context ends waiting for a permit or a token", func(t *testing.T) {
		srv, cc := start(t, server.Hang)
		reg := prometheus.NewRegistry()
		rt := inventory(t, policy.Service{
			Breaker:  breakerPolicy(1, 1),
			Bulkhead: &policy.Bulkhead{Permits: 1, MaxWait: 10 * time.Second},
			Methods: []policy.Method{
				{Name: getStock, Idempotent: true},
				{Name: reserveStock, RateLimit: &policy.RateLimit{RequestsPerSecond: 1, Burst: 1, MaxWait: 10 * time.Second}},
			},
		}, runtime.WithRegisterer(reg))
		holder, release := context.WithCancel(context.Background())
		held := make(chan error, 1)
		go func() { _, err := callGetStock(holder, rt, cc); held <- err }()
		eventually(t, "the first call holds the permit", func() bool { return srv.Calls(getStock) == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		if _, err := callGetStock(ctx, rt, cc); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("waiting for a permit: %v, want DEADLINE_EXCEEDED", err)
		}
		release()
		if err := <-held; status.Code(err) != codes.Canceled {
			t.Fatalf("the holder: %v, want CANCELLED", err)
		}
		// Neither the wait nor the holder's own cancellation counts: with
		// minimum_calls 1, one failure would have opened the breaker.
		wantBreaker(t, rt, getStock, runtime.StateClosed)
		wantMetric(t, reg, 0, "resilient_client_bulkhead_rejections_total", "method", "GetStock")
		wantMetric(t, reg, 1, "resilient_client_attempts_total", "method", "GetStock", "code", "CANCELLED")

		srv.SetBehaviour(server.Healthy)
		plain := inventoryv1.NewInventoryServiceClient(cc)
		reserve := func(ctx context.Context) error {
			_, err := runtime.Unary(ctx, rt.Method(1), "", &inventoryv1.ReserveStockRequest{OrderId: "o"}, nil, plain.ReserveStock, nil)
			return err
		}
		if err := reserve(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx2, cancel2 := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel2)
		if err := reserve(ctx2); status.Code(err) != codes.Canceled {
			t.Fatalf("waiting for a token: %v, want CANCELLED", err)
		}
		wantMetric(t, reg, 0, "resilient_client_rate_limited_total", "method", "ReserveStock")
		if got := srv.Calls(reserveStock); got != 1 {
			t.Errorf("server saw %d ReserveStock calls, want 1", got)
		}
	})

	t.Run("the caller cancels a probe mid-flight", func(t *testing.T) {
		srv, cc := start(t, server.Fail(codes.Unavailable))
		clock := newFakeClock()
		rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1)}, runtime.WithClock(clock))
		for range 2 {
			_, _ = callGetStock(context.Background(), rt, cc)
		}
		wantBreaker(t, rt, getStock, runtime.StateOpen)
		clock.Advance(10 * time.Second)
		srv.SetBehaviour(server.Hang)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		if _, err := callGetStock(ctx, rt, cc); status.Code(err) != codes.Canceled {
			t.Fatalf("cancelled probe: %v, want CANCELLED", err)
		}
		// Neither success nor failure: still half-open, its place free.
		wantBreaker(t, rt, getStock, runtime.StateHalfOpen)
		srv.SetBehaviour(server.Healthy)
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatalf("the next probe: %v", err)
		}
		wantBreaker(t, rt, getStock, runtime.StateClosed)
	})
}

func TestAPanicCannotWedgeTheBreaker(t *testing.T) {
	srv, err := server.Start("127.0.0.1:0", server.Fail(codes.Unavailable))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	var panics atomic.Bool
	cc := dialFault(t, srv.Addr(), grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if panics.Load() {
			panic("interceptor panicked")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1), Bulkhead: &policy.Bulkhead{Permits: 1}},
		runtime.WithClock(clock), runtime.WithRegisterer(reg))
	for range 2 {
		_, _ = callGetStock(context.Background(), rt, cc)
	}
	wantBreaker(t, rt, getStock, runtime.StateOpen)
	srv.SetBehaviour(server.Healthy)
	// Every cool-down, the one probe panics; each time, its place and its
	// permit come back.
	panics.Store(true)
	for range 20 {
		clock.Advance(10 * time.Second)
		wantPanic(t, "interceptor panicked", func() { _, _ = callGetStock(context.Background(), rt, cc) })
		wantBreaker(t, rt, getStock, runtime.StateHalfOpen)
		wantPermits(t, rt, getStock, 0)
	}
	panics.Store(false)
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatalf("after the panics: %v, want the probe admitted", err)
	}
	wantBreaker(t, rt, getStock, runtime.StateClosed)
	wantMetric(t, reg, 20, "resilient_client_attempts_total", "method", "GetStock", "code", "UNKNOWN")
	wantMetric(t, reg, 0, "resilient_client_breaker_rejections_total", "method", "GetStock")
	if got := srv.Calls(getStock); got != 3 {
		t.Errorf("server saw %d calls, want 3: the panicking ones never left", got)
	}
}

func TestQuietStreamsDoNotStarveUnaryCalls(t *testing.T) {
	t.Run("a late first message is not a slow call", func(t *testing.T) {
		srv, cc := start(t, server.Healthy)
		clock := newFakeClock()
		bp := breakerPolicy(2, 1)
		bp.SlowCallThreshold = 100 * time.Millisecond
		rt := inventory(t, policy.Service{Breaker: bp, Methods: []policy.Method{
			{Name: getStock, Idempotent: true},
			{Name: watchStock, Kind: policy.KindServerStreaming, Timeout: time.Hour},
		}}, runtime.WithClock(clock))
		client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
		for range 4 {
			st := watchOK(t, client)
			clock.Advance(time.Minute) // the watch had nothing to say for a minute
			drain(t, st, 3)
		}
		wantBreaker(t, rt, getStock, runtime.StateClosed)
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatalf("a unary call after late watches: %v", err)
		}
		if got := srv.Calls(watchStock); got != 4 {
			t.Errorf("server saw %d streams, want 4", got)
		}
	})

	srv, cc := start(t, byMethod(map[string]server.Behaviour{
		getStock:   server.Fail(codes.Unavailable),
		watchStock: server.Hang,
	}))
	clock := newFakeClock()
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 3), Methods: []policy.Method{
		{Name: getStock, Idempotent: true},
		{Name: watchStock, Kind: policy.KindServerStreaming, Timeout: time.Minute},
	}}, runtime.WithClock(clock))
	client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	for range 2 {
		_, _ = callGetStock(context.Background(), rt, cc)
	}
	wantBreaker(t, rt, getStock, runtime.StateOpen)
	if _, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"}); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("a stream while open: %v, want ErrCircuitOpen", err)
	}
	srv.SetBehaviour(byMethod(map[string]server.Behaviour{watchStock: server.Hang}))
	clock.Advance(10 * time.Second)
	// Half-open: as many quiet streams as probes, and more, go through
	// without taking one.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 5 {
		if _, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
			t.Fatalf("stream %d while half-open: %v", i, err)
		}
	}
	eventually(t, "the server holds the 5 quiet streams", func() bool { return srv.Calls(watchStock) == 5 })
	wantBreaker(t, rt, getStock, runtime.StateHalfOpen)
	for i := range 3 {
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatalf("unary probe %d with 5 streams open: %v", i, err)
		}
	}
	wantBreaker(t, rt, getStock, runtime.StateClosed)
	cancel()
	eventually(t, "the server saw the streams end", func() bool { return srv.Cancelled(watchStock) == 5 })
	wantBreaker(t, rt, getStock, runtime.StateClosed)

	// A stream beside the probes cannot close the breaker, but its failure
	// opens it again, as a probe's would.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	for range 2 {
		_, _ = callGetStock(context.Background(), rt, cc)
	}
	wantBreaker(t, rt, getStock, runtime.StateOpen)
	clock.Advance(10 * time.Second)
	srv.SetBehaviour(server.Healthy)
	drain(t, watchOK(t, client), 3)
	wantBreaker(t, rt, getStock, runtime.StateHalfOpen)
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	if _, err := watchOK(t, client).Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("recv: %v, want UNAVAILABLE", err)
	}
	wantBreaker(t, rt, getStock, runtime.StateOpen)
}

// A hedged copy runs on a goroutine of its own: its panic still reaches the
// caller, the other copies are cut, and every permit comes back.
func TestAPanicInAHedgedCopyReachesTheCaller(t *testing.T) {
	srv, err := server.Start("127.0.0.1:0", server.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	var n atomic.Int32
	cc := dialFault(t, srv.Addr(), grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if n.Add(1) == 2 {
			panic("second copy panicked")
		}
		<-ctx.Done() // the first copy hangs until it is cut
		return ctx.Err()
	}))
	rt := inventory(t, policy.Service{Bulkhead: &policy.Bulkhead{Permits: 1}, Methods: []policy.Method{{
		Name: getStock, Idempotent: true, Timeout: 5 * time.Second,
		Hedging: &policy.Hedging{Delay: 5 * time.Millisecond, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)},
	}}})
	wantPanic(t, "second copy panicked", func() { _, _ = callGetStock(context.Background(), rt, cc) })
	wantPermits(t, rt, getStock, 0)
	if got := n.Load(); got != 2 {
		t.Errorf("%d copies were sent, want 2: none after the panic", got)
	}
}
