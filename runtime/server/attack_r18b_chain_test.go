package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// chainLog records, for each interceptor a test installs, whether it ran
// inside the Guard's (its context carries the Guard's record of the
// request; a stream interceptor is handed the Guard's stream).
type chainLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *chainLog) add(name string, inside bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	where := "outside"
	if inside {
		where = "inside"
	}
	l.seen = append(l.seen, name+" "+where)
}

func (l *chainLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seen
	l.seen = nil
	return s
}

func (l *chainLog) unary(name string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		_, inside := ctx.Value(downstreamKey{}).(*downstream)
		l.add(name, inside)
		return h(ctx, req)
	}
}

func (l *chainLog) stream(name string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		_, inside := ss.(*guardedStream)
		l.add(name, inside)
		return h(srv, ss)
	}
}

// TestAttackR18bChainOrder: where the Guard's interceptors run among a
// server's others, unary and stream, as the README says: chained
// interceptors given before ServerOptions run outside the Guard, those
// given after run inside it, and gRPC's single grpc.UnaryInterceptor and
// grpc.StreamInterceptor run outside every chained one, wherever they are
// given. Inside means behind the Guard's refusals: a keyed repeat the
// Guard replays never reaches an interceptor inside it.
func TestAttackR18bChainOrder(t *testing.T) {
	srv := &inventoryServer{}
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	var l chainLog
	var opts []grpc.ServerOption
	opts = append(opts, grpc.ChainUnaryInterceptor(l.unary("before")), grpc.ChainStreamInterceptor(l.stream("before")))
	opts = append(opts, g.ServerOptions()...)
	opts = append(opts, grpc.ChainUnaryInterceptor(l.unary("after")), grpc.ChainStreamInterceptor(l.stream("after")))
	opts = append(opts, grpc.UnaryInterceptor(l.unary("single")), grpc.StreamInterceptor(l.stream("single")))
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))

	want := []string{"single outside", "before outside", "after inside"}
	if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := l.take(); !slices.Equal(got, want) {
		t.Errorf("unary: %v, want %v", got, want)
	}
	st, err := client.WatchStock(ctxTimeout(t, time.Second), &inventoryv1.WatchStockRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := l.take(); !slices.Equal(got, want) {
		t.Errorf("stream: %v, want %v", got, want)
	}
	for i := range 2 {
		if _, err := reserve(t, client, "chain-1"); err != nil {
			t.Fatal(err)
		}
		got := l.take()
		if i == 1 {
			want = want[:2] // replayed by the Guard
		}
		if !slices.Equal(got, want) {
			t.Errorf("keyed request %d: %v, want %v", i, got, want)
		}
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("ReserveStock ran %d times, want 1", n)
	}
}

// TestAttackR18bOuterInterceptorRefuses: an interceptor outside the
// Guard's (authentication, a rate limit of the server's own) refuses a
// request the tap had admitted: its handler never runs, the Guard's
// interceptor never sees it, and its place in flight comes back, unary
// and stream. Under a limit of 2, twenty such refusals leave room for the
// requests after them.
func TestAttackR18bOuterInterceptorRefuses(t *testing.T) {
	srv := &inventoryServer{}
	p := inventoryPolicy()
	p.Shedding.Limits = policy.Limits{Low: 2, Normal: 2, High: 2, Critical: 2}
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	var refuse sync.Map // method → true
	authU := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if _, no := refuse.Load(info.FullMethod); no {
			return nil, status.Error(codes.PermissionDenied, "not you")
		}
		return h(ctx, req)
	}
	authS := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if _, no := refuse.Load(info.FullMethod); no {
			return status.Error(codes.PermissionDenied, "not you")
		}
		return h(srv, ss)
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(authU), grpc.ChainStreamInterceptor(authS)}, g.ServerOptions()...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	refuse.Store(getStock, true)
	refuse.Store(watchStock, true)
	for i := range 10 {
		if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("unary %d: %v, want the outer interceptor's PERMISSION_DENIED", i, err)
		}
		st, err := client.WatchStock(ctxTimeout(t, time.Second), &inventoryv1.WatchStockRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("stream %d: %v, want PERMISSION_DENIED", i, fmt.Sprint(err))
		}
	}
	eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
	refuse.Clear()
	for i := range 5 {
		if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
			t.Fatalf("admitted request %d after the refusals: %v", i, err)
		}
	}
	s := stats(t, g)
	if s.Admitted[PriorityHigh] != 15 || s.Admitted[PriorityLow] != 10 || s.Shed != [PriorityCritical + 1]uint64{} {
		t.Errorf("admitted %v shed %v, want 15 high and 10 low admitted, none shed", s.Admitted, s.Shed)
	}
	if n, m := srv.getCalls.Load(), srv.watchCalls.Load(); n != 5 || m != 0 {
		t.Errorf("handlers ran %d and %d times, want 5 and 0", n, m)
	}
}
