package server

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

func TestDeadlineTooShortRefusedBeforeHandler(t *testing.T) {
	srv := &inventoryServer{}
	// GetStock needs 10s here, and the short call brings 2s: a deadline
	// short enough to refuse, long enough that a loaded machine does not
	// expire it on the client's side before it is sent (a 20ms one did, in
	// a run beside other tests, and the server counted nothing).
	p := inventoryPolicy()
	p.Methods[0].MinDeadline, p.Methods[0].DefaultTimeout = 10*time.Second, 10*time.Second
	g, client, _ := guarded(t, srv, []*policy.Server{p})

	// Refused by the server (counted below), without the handler.
	_, err := client.GetStock(ctxTimeout(t, 2*time.Second), &inventoryv1.GetStockRequest{Sku: "a"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("GetStock with 2s left: %v, want DEADLINE_EXCEEDED", err)
	}
	if n := srv.getCalls.Load(); n != 0 {
		t.Errorf("handler ran %d times, want 0", n)
	}
	if s := stats(t, g); s.DeadlineRefused != 1 || s.InFlight != 0 {
		t.Errorf("stats %+v, want 1 refused, 0 in flight", s)
	}
	// With enough time it runs.
	if _, err := client.GetStock(ctxTimeout(t, 30*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	if n := srv.getCalls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestDeadlineExpiredRefusedBeforeHandler(t *testing.T) {
	srv := &inventoryServer{}
	// MinDeadline 0: only a deadline that has passed is refused. The tap
	// sees the deadline gRPC read from grpc-timeout; a tiny one has passed
	// by the time the tap runs.
	p := inventoryPolicy()
	p.Methods[0].MinDeadline = 0
	g, client, _ := guarded(t, srv, []*policy.Server{p})
	for range 20 {
		_, err := client.GetStock(ctxTimeout(t, time.Microsecond), &inventoryv1.GetStockRequest{Sku: "a"})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("GetStock with 1µs: %v, want DEADLINE_EXCEEDED", err)
		}
	}
	if n := srv.getCalls.Load(); n != 0 {
		t.Errorf("handler ran %d times, want 0", n)
	}
	if s := stats(t, g); s.InFlight != 0 {
		t.Errorf("%d left in flight", s.InFlight)
	}
}

func TestCheckDeadline(t *testing.T) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if err := checkDeadline(past, "/s/M", 0, true); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("passed deadline: %v", err)
	}
	// 500 ms, short of the 1 s needed, and long enough that a loaded
	// machine does not let it pass (another message) before the check.
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	err := checkDeadline(short, "/s/M", time.Second, true)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("short deadline: %v", err)
	}
	want := "resilient: /s/M needs at least 1s, the caller left "
	if got := status.Convert(err).Message(); len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("message %q, want it to start with %q", got, want)
	}
	if err := checkDeadline(context.Background(), "/s/M", time.Second, true); err != nil {
		t.Errorf("no deadline: %v", err)
	}
}

func TestDefaultTimeoutWhenCallerSentNone(t *testing.T) {
	srv := &inventoryServer{}
	deadlines := make(chan time.Duration, 4)
	srv.sawCtx = func(ctx context.Context) {
		dl, ok := ctx.Deadline()
		if !ok {
			deadlines <- -1
			return
		}
		deadlines <- time.Until(dl)
	}
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})

	// No deadline from the caller: the annotated 2 s applies.
	if _, err := client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	if d := <-deadlines; d <= time.Second || d > 2*time.Second {
		t.Errorf("handler's deadline in %s, want about 2s", d)
	}
	// The caller's own deadline wins, even when longer.
	if _, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	if d := <-deadlines; d <= 4*time.Second {
		t.Errorf("handler's deadline in %s, want about 5s (the caller's)", d)
	}
	// Streams too (WatchStock: 1 s).
	st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if d := <-deadlines; d <= 0 || d > time.Second {
		t.Errorf("stream handler's deadline in %s, want about 1s", d)
	}
}

// A request whose caller cancelled it before it started (no deadline to
// tell) is refused as the passed deadline is: neither a plain handler nor
// a deduplicated one runs, and no idempotency key is claimed.
func TestCancelledRequestRefusedBeforeHandler(t *testing.T) {
	store := NewMemoryStore(1000)
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	handler := func(ctx context.Context, req any) (any, error) {
		ran++
		return &inventoryv1.ReserveStockResponse{}, nil
	}
	ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(),
		metadata.Pairs(runtime.IdempotencyKeyHeader, "order-1")))
	cancel()
	for _, method := range []string{getStock, reserveStock} {
		_, err := g.UnaryInterceptor(ctx, &inventoryv1.ReserveStockRequest{}, &grpc.UnaryServerInfo{FullMethod: method}, handler)
		if status.Code(err) != codes.Canceled {
			t.Errorf("%s cancelled before it started: %v, want CANCELLED", method, err)
		}
	}
	if ran != 0 {
		t.Errorf("the handler ran %d times, want 0", ran)
	}
	// The key was never claimed: a live repeat runs at once.
	live := metadata.NewIncomingContext(context.Background(), metadata.Pairs(runtime.IdempotencyKeyHeader, "order-1"))
	if _, err := g.UnaryInterceptor(live, &inventoryv1.ReserveStockRequest{}, &grpc.UnaryServerInfo{FullMethod: reserveStock}, handler); err != nil || ran != 1 {
		t.Errorf("a live repeat: %v, ran %d, want it run once", err, ran)
	}
}
