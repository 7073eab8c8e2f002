package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// marks are the reasons of the do-not-retry domain's ErrorInfo details
// err carries.
func marks(err error) map[string]bool {
	m := map[string]bool{}
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == runtime.DoNotRetryDomain {
			m[ei.GetReason()] = true
		}
	}
	return m
}

// TestAttack19bLateDeadlineRefusalIsTheServersOwn: a request admitted at
// the door with time enough, whose time then runs short inside the server
// (its own interceptors outside the Guard's, 400 ms, unary and stream),
// is refused DEADLINE_EXCEEDED with the do-not-retry mark but without
// DEADLINE_TOO_SHORT, which would have its callers' breakers take the
// server's own slowness for a caller's short deadline; a request whose
// caller left too little at the door is still marked both ways. Neither
// reaches the handler, and each counts once in DeadlineRefused.
//
// The times leave a loaded machine room: a request late by 400 ms in the
// server came with 1.3s, so it may take 300 ms to arrive and still pass
// the door (MinDeadline 1s); one refused at the door came with 500 ms,
// its answer's time to come back (60 ms of 100 were not enough, at load 8).
func TestAttack19bLateDeadlineRefusalIsTheServersOwn(t *testing.T) {
	p := inventoryPolicy()
	p.Methods[0].MinDeadline, p.Methods[0].DefaultTimeout = time.Second, 2*time.Second // GetStock
	p.Methods[2].MinDeadline, p.Methods[2].DefaultTimeout = time.Second, 2*time.Second // WatchStock
	srv := &inventoryServer{}
	slowU := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		time.Sleep(400 * time.Millisecond)
		return h(ctx, req)
	}
	slowS := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		time.Sleep(400 * time.Millisecond)
		return h(srv, ss)
	}
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(slowU), grpc.ChainStreamInterceptor(slowS)}, g.ServerOptions()...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))

	_, late := client.GetStock(ctxTimeout(t, 1300*time.Millisecond), &inventoryv1.GetStockRequest{Sku: "a"})
	_, door := client.GetStock(ctxTimeout(t, 500*time.Millisecond), &inventoryv1.GetStockRequest{Sku: "a"})
	var lateStream error
	if st, err := client.WatchStock(ctxTimeout(t, 1300*time.Millisecond), &inventoryv1.WatchStockRequest{Sku: "a"}); err != nil {
		lateStream = err
	} else {
		_, lateStream = st.Recv()
	}
	for name, c := range map[string]struct {
		err            error
		tooShort, mark bool
	}{
		"unary, late": {late, false, true}, "unary, at the door": {door, true, true}, "stream, late": {lateStream, false, true},
	} {
		if errors.Is(c.err, io.EOF) || status.Code(c.err) != codes.DeadlineExceeded {
			t.Errorf("%s: %v, want the Guard's DEADLINE_EXCEEDED", name, c.err)
			continue
		}
		m := marks(c.err)
		if m[runtime.DeadlineReason] != c.tooShort || m[runtime.DoNotRetryReason] != c.mark {
			t.Errorf("%s: marks %v, want DEADLINE_TOO_SHORT %v and do-not-retry %v (%v)", name, m, c.tooShort, c.mark, c.err)
		}
	}
	if n := srv.getCalls.Load() + srv.watchCalls.Load(); n != 0 {
		t.Errorf("the handlers ran %d times, want 0", n)
	}
	if s := stats(t, g); s.DeadlineRefused != 3 {
		t.Errorf("DeadlineRefused %d, want 3", s.DeadlineRefused)
	}
}

// TestAttack19bSlowClaimRefusalIsTheServersOwn: the idempotency store
// takes 300 ms to claim ReserveStock's key (MinDeadline 400 ms) for a
// request that came with 600 ms (80, 100 and 150 ms left the refusal too
// little time to reach the caller before its own deadline at load 16):
// the door admitted it, the check after
// the claim refuses it. That time went in the server's own store, so the
// refusal (which dedup returns without passing through the handler's
// settling) carries the do-not-retry mark only, never DEADLINE_TOO_SHORT,
// and the key is freed: the retry, with the store prompt again, runs.
func TestAttack19bSlowClaimRefusalIsTheServersOwn(t *testing.T) {
	p := inventoryPolicy()
	p.Methods[1].MinDeadline = 400 * time.Millisecond
	store := &slowClaimStore{Store: NewMemoryStore(10), delay: 300 * time.Millisecond}
	store.slow.Store(true)
	srv := &inventoryServer{}
	g, client, _ := guarded(t, srv, []*policy.Server{p}, WithStore(store))
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1}
	_, err := client.ReserveStock(withKey(ctxTimeout(t, 600*time.Millisecond), "o-1"), req)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a request whose claim took 300 of its 600 ms: %v, want the Guard's DEADLINE_EXCEEDED", err)
	}
	if m := marks(err); m[runtime.DeadlineReason] || !m[runtime.DoNotRetryReason] {
		t.Errorf("marks %v after the server's own slow claim; want do-not-retry alone (%v)", m, err)
	}
	store.slow.Store(false)
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, time.Second), "o-1"), req); err != nil || srv.reserveCalls.Load() != 1 {
		t.Errorf("the retry: %v, ran %d; want it run once (the key freed)", err, srv.reserveCalls.Load())
	}
	if s := stats(t, g); s.DeadlineRefused != 1 || s.StoreErrors != 0 {
		t.Errorf("DeadlineRefused %d, StoreErrors %d; want 1 and 0", s.DeadlineRefused, s.StoreErrors)
	}
}
