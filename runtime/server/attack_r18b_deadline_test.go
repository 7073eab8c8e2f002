package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18bDefaultTimeoutIsNotTheCallersDeadline: a method whose
// DefaultTimeout equals its MinDeadline (Validate accepts it: only a
// DefaultTimeout below MinDeadline is refused) serves a request that came
// without a deadline. The tap gives it the DefaultTimeout; by the time the
// interceptor checks MinDeadline again, some of it has passed, and the
// Guard must not refuse the request for a deadline it set itself: the
// caller left none; nor when claiming an idempotency key took some of it.
// Both paths (the tap, and the interceptors alone) run the handler.
func TestAttackR18bDefaultTimeoutIsNotTheCallersDeadline(t *testing.T) {
	for _, tapped := range []bool{true, false} {
		name := "interceptors alone"
		if tapped {
			name = "tap and interceptors"
		}
		t.Run(name, func(t *testing.T) {
			srv := &inventoryServer{}
			var left time.Duration
			srv.sawCtx = func(ctx context.Context) {
				if dl, ok := ctx.Deadline(); ok {
					left = time.Until(dl)
				}
			}
			p := inventoryPolicy()
			for i := range 3 { // GetStock, ReserveStock, which deduplicates, and the stream WatchStock
				p.Methods[i].MinDeadline = 50 * time.Millisecond
				p.Methods[i].DefaultTimeout = 50 * time.Millisecond
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("the policy under test is refused: %v", err)
			}
			g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			opts := g.ServerOptions()
			if !tapped {
				opts = []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.UnaryInterceptor), grpc.ChainStreamInterceptor(g.StreamInterceptor)}
			}
			cc := dial(t, serve(t, srv, opts...))
			client := inventoryv1.NewInventoryServiceClient(cc)
			for i := range 5 {
				// No deadline from the caller.
				if _, err := client.GetStock(context.Background(), &inventoryv1.GetStockRequest{}); err != nil {
					t.Fatalf("request %d without a deadline: %v; want it served under the 50ms DefaultTimeout", i, err)
				}
				if left <= 0 || left > 50*time.Millisecond {
					t.Errorf("request %d: the handler had %s left, want the DefaultTimeout's 50ms or a little less", i, left)
				}
				// The claim of the key took some of the 50ms too.
				if _, err := client.ReserveStock(withKey(context.Background(), "k"+itoa(int64(i))), &inventoryv1.ReserveStockRequest{}); err != nil {
					t.Fatalf("keyed request %d without a deadline: %v; want it served under the 50ms DefaultTimeout", i, err)
				}
				st, err := client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{})
				if err == nil {
					_, err = st.Recv()
				}
				if err != nil {
					t.Fatalf("stream %d without a deadline: %v; want it served under the 50ms DefaultTimeout", i, err)
				}
			}
			// A caller that sends a deadline shorter than MinDeadline is still
			// refused.
			_, code, _ := rawCall(t, cc.Target(), getStock, &inventoryv1.GetStockRequest{}, time.Second, http.Header{"Grpc-Timeout": {"40m"}})
			if code != codes.DeadlineExceeded {
				t.Errorf("a caller's 40ms deadline: %s, want DEADLINE_EXCEEDED (MinDeadline 50ms)", code)
			}
			if n, m, w := srv.getCalls.Load(), srv.reserveCalls.Load(), srv.watchCalls.Load(); n != 5 || m != 5 || w != 5 {
				t.Errorf("the handlers ran %d, %d and %d times, want 5 each", n, m, w)
			}
			// The last stream's place is given back when its handler has
			// returned, which may be just after the client read its message.
			eventually(t, "every place in flight given back", func() bool { return stats(t, g).InFlight == 0 })
			if s := stats(t, g); s.DeadlineRefused != 1 {
				t.Errorf("stats: %d refused as dead; want 1", s.DeadlineRefused)
			}
		})
	}
}

// TestAttackR18bHostileGrpcTimeout: grpc-timeout values gRPC cannot parse
// (a unit it does not know, no digits, a sign, nine digits, an empty
// value) never reach the handler, never take a place in flight, and never
// crash the server; the next ordinary request is served.
func TestAttackR18bHostileGrpcTimeout(t *testing.T) {
	srv := &inventoryServer{}
	g, client, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for _, v := range []string{"1x", "m", "-5m", "+5m", "123456789m", "5 m", "0x10m", "\u00bdm"} {
		_, code, text := rawCall(t, cc.Target(), getStock, &inventoryv1.GetStockRequest{}, time.Second, http.Header{"Grpc-Timeout": {v}})
		if code == codes.OK {
			t.Errorf("grpc-timeout %q: served (%q), want a refusal", v, text)
		}
	}
	if n := srv.getCalls.Load(); n != 0 {
		t.Errorf("the handler ran %d times for unparsable timeouts", n)
	}
	if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
		t.Fatalf("an ordinary request after the hostile ones: %v", err)
	}
	if s := stats(t, g); s.InFlight != 0 {
		t.Errorf("%d places in flight left behind", s.InFlight)
	}
}

// TestAttackR18bDeadlinePassesBetweenTapAndHandler: a request admitted by
// the tap whose deadline passes while it waits for a server worker (here:
// an interceptor outside the Guard that takes longer than the deadline)
// is refused before the handler, gives its place back, and is counted.
func TestAttackR18bDeadlinePassesBetweenTapAndHandler(t *testing.T) {
	srv := &inventoryServer{}
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	slowOuter := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		<-ctx.Done() // a queue in front of the Guard's interceptor, longer than the deadline
		return h(ctx, req)
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(slowOuter)}, g.ServerOptions()...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	for range 5 {
		_, err := client.GetStock(ctxTimeout(t, 100*time.Millisecond), &inventoryv1.GetStockRequest{})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("%v, want DEADLINE_EXCEEDED", err)
		}
	}
	if n := srv.getCalls.Load(); n != 0 {
		t.Errorf("the handler ran %d times for requests already dead", n)
	}
	eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
	if s := stats(t, g); s.Admitted[PriorityHigh] != 5 {
		t.Errorf("admitted %v, want the 5 by the tap", s.Admitted)
	}
}

// TestAttackR18bHostilePath: a caller that spells the method's path
// another way (a doubled or trailing slash, a query, an escape, another
// case) to slip past the Guard, whose policies are keyed by the exact
// name, finds that gRPC routes only the exact name too: every variant
// that reaches a handler was admitted by the Guard (here, none does).
func TestAttackR18bHostilePath(t *testing.T) {
	srv := &inventoryServer{}
	g, _, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	variants := []string{
		"//example.inventory.v1.InventoryService/GetStock",
		"/example.inventory.v1.InventoryService//GetStock",
		"/example.inventory.v1.InventoryService/GetStock/",
		"/example.inventory.v1.InventoryService/GetStock?x=1",
		"/example.inventory.v1.InventoryService/GetStock%2F",
		"/example.inventory.v1.InventoryService/Get%53tock",
		"/example.inventory.v1.InventoryService/getstock",
		"/./example.inventory.v1.InventoryService/GetStock",
	}
	served := 0
	for _, v := range variants {
		_, code, text := rawCall(t, cc.Target(), v, &inventoryv1.GetStockRequest{}, time.Second, nil)
		if code == codes.OK {
			served++
		}
		t.Logf("%s: %s %q", v, code, text)
	}
	s := stats(t, g)
	if n := srv.getCalls.Load(); int(n) != served || s.Admitted[PriorityHigh] != uint64(served) {
		t.Errorf("%d variants served, the handler ran %d times, the Guard admitted %d: a request reached the handler past the Guard", served, n, s.Admitted[PriorityHigh])
	}
}
