package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack19cInterceptorsAloneOuterDelayIsMarkedTooShort: the known
// limit of the Guard's interceptors installed without its tap, exactly
// as the README's "Dead requests" states it. Behind a slow interceptor of
// the server's own (800 ms, unary and stream), a request that came with
// 1.5 s, enough for the method's MinDeadline of 1 s when it arrived, is
// refused after the server's own 800 ms. Without the tap, the Guard's
// interceptor is the door: it sees the deadline, not when the request
// arrived, so it counts the time before it as the caller's and marks the
// refusal both DEADLINE_TOO_SHORT and do-not-retry, as for a caller that
// sent too little; its callers' breakers then count the server's own
// slowness as nothing. The handler does not run, and each refusal counts
// once in DeadlineRefused. (With the tap, the same delay is the server's
// own and is marked do-not-retry alone:
// TestAttack19bLateDeadlineRefusalIsTheServersOwn.)
//
// The times leave a loaded machine room, on a connection made first: the
// request may take 500 ms to arrive and still have its MinDeadline, and
// the refusal has 700 ms to come back before the caller's own deadline
// ends the call without the Guard's marks (with 150 ms, 80 ms of them in
// the interceptor, 70 ms were not enough under load).
func TestAttack19cInterceptorsAloneOuterDelayIsMarkedTooShort(t *testing.T) {
	p := inventoryPolicy()
	p.Methods[0].MinDeadline = time.Second                                             // GetStock (its DefaultTimeout is 2 s)
	p.Methods[2].MinDeadline, p.Methods[2].DefaultTimeout = time.Second, 2*time.Second // WatchStock
	srv := &inventoryServer{}
	slowU := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		time.Sleep(800 * time.Millisecond)
		return h(ctx, req)
	}
	slowS := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		time.Sleep(800 * time.Millisecond)
		return h(srv, ss)
	}
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	cc := dial(t, serve(t, srv, grpc.ChainUnaryInterceptor(slowU, g.UnaryInterceptor), grpc.ChainStreamInterceptor(slowS, g.StreamInterceptor)))
	connected(t, cc)
	client := inventoryv1.NewInventoryServiceClient(cc)
	_, late := client.GetStock(ctxTimeout(t, 1500*time.Millisecond), &inventoryv1.GetStockRequest{Sku: "a"})
	var lateStream error
	if st, err := client.WatchStock(ctxTimeout(t, 1500*time.Millisecond), &inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
		lateStream = err
	} else {
		_, lateStream = st.Recv()
	}
	for name, err := range map[string]error{"unary": late, "stream": lateStream} {
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%s: %v, want the Guard's DEADLINE_EXCEEDED", name, err)
			continue
		}
		if m := marks(err); !m[runtime.DeadlineReason] || !m[runtime.DoNotRetryReason] {
			t.Errorf("%s: marks %v, want DEADLINE_TOO_SHORT and do-not-retry: with the interceptors alone, the time before them is the caller's (%v)", name, m, err)
		}
	}
	if n := srv.getCalls.Load() + srv.watchCalls.Load(); n != 0 {
		t.Errorf("the handlers ran %d times, want 0", n)
	}
	if s := stats(t, g); s.DeadlineRefused != 2 {
		t.Errorf("DeadlineRefused %d, want 2", s.DeadlineRefused)
	}
}

// connected connects cc and waits, up to 10 s, until it is ready, so that
// a request timed from its start does not spend its time dialling.
func connected(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("the connection to %s is %v after 10s", cc.Target(), s)
		}
	}
}
