package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackHostileKeys: a key far longer than any real one is refused
// with INVALID_ARGUMENT before the store holds it (a megabyte per entry
// would make NewMemoryStore(n) hold n megabytes); a key of MaxKeyLength is
// kept; an empty key is no key (not deduplicated, as documented); a key of
// bytes outside ASCII, which grpc-go will not send but an HTTP/2 client
// will, is deduplicated like any other.
func TestAttackHostileKeys(t *testing.T) {
	srv := &inventoryServer{}
	store := NewMemoryStore(10)
	g, client, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithStore(store))

	_, err := reserve(t, client, strings.Repeat("k", 1<<20))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "longer than") || len(err.Error()) > 1000 {
		t.Errorf("a 1 MiB key: %.300v, want a short INVALID_ARGUMENT naming the limit", err)
	}
	if srv.reserveCalls.Load() != 0 || store.Len() != 0 {
		t.Errorf("a 1 MiB key ran %d times and left %d entries, want none", srv.reserveCalls.Load(), store.Len())
	}

	longest := strings.Repeat("k", MaxKeyLength)
	a, err := reserve(t, client, longest)
	if err != nil {
		t.Fatal(err)
	}
	b, err := reserve(t, client, longest)
	if err != nil || b.GetReservationId() != a.GetReservationId() {
		t.Errorf("repeat with a key of MaxKeyLength: %v %v, want the replay of %v", b, err, a)
	}

	for range 2 {
		ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, time.Second), runtime.IdempotencyKeyHeader, "")
		if _, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "e"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.reserveCalls.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3: one for the longest key, two for the empty one", n)
	}

	binary := "\xff\xfe\x80k\xc3\x28\x7f\x7e"[:6] + "ключ"
	req := &inventoryv1.ReserveStockRequest{OrderId: "bin", Sku: "a", Units: 1}
	var answers []string
	for i := range 3 {
		msg, code, text := rawCall(t, cc.Target(), reserveStock, req, time.Second, http.Header{runtime.IdempotencyKeyHeader: {binary}})
		if code != codes.OK {
			t.Fatalf("raw call %d with a binary key: %s %q", i, code, text)
		}
		var resp inventoryv1.ReserveStockResponse
		if err := proto.Unmarshal(msg, &resp); err != nil {
			t.Fatal(err)
		}
		answers = append(answers, resp.GetReservationId())
	}
	if answers[0] != answers[1] || answers[1] != answers[2] || srv.reserveCalls.Load() != 4 {
		t.Errorf("binary key: answers %q after %d runs, want one answer and one run", answers, srv.reserveCalls.Load())
	}
	if s := stats(t, g); s.Replayed != 3 {
		t.Errorf("replayed %d, want 3", s.Replayed)
	}
}

// TestAttackHostilePriority: whatever a caller writes in the priority
// header (a higher priority, other spellings, garbage, bytes outside ASCII,
// a huge value, many values), the granted priority is never above the
// method's annotation, and the lowest known value sent wins.
func TestAttackHostilePriority(t *testing.T) {
	srv := &inventoryServer{}
	var granted Priority
	srv.sawCtx = func(ctx context.Context) { granted, _ = PriorityFrom(ctx) }
	g, client, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()}) // GetStock is high
	cases := []struct {
		values []string
		want   Priority
	}{
		{[]string{"critical"}, PriorityHigh},
		{[]string{"CRITICAL"}, PriorityHigh},
		{[]string{"4"}, PriorityHigh},
		{[]string{"-1"}, PriorityHigh},
		{[]string{"critical", "high"}, PriorityHigh},
		{[]string{"garbage", "low"}, PriorityLow},
		{[]string{"critical,low"}, PriorityHigh},
		{[]string{" low"}, PriorityHigh},
		{[]string{strings.Repeat("low", 20000)}, PriorityHigh},
		{[]string{"critical", "normal", "critical"}, PriorityNormal},
	}
	for _, c := range cases {
		md := metadata.MD{PriorityHeader: c.values}
		ctx := metadata.NewOutgoingContext(ctxTimeout(t, time.Second), md)
		if _, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{}); err != nil {
			t.Fatalf("%.40q: %v", c.values, err)
		}
		if granted != c.want {
			t.Errorf("priority header %.40q: granted %s, want %s", c.values, granted, c.want)
		}
	}
	_, code, text := rawCall(t, cc.Target(), getStock, &inventoryv1.GetStockRequest{}, time.Second,
		http.Header{PriorityHeader: {"cr\xffitical", "\xc3\x28"}})
	if code != codes.OK || granted != PriorityHigh {
		t.Errorf("priority header of bytes outside ASCII: %s %q, granted %s; want OK at high", code, text, granted)
	}
	if s := stats(t, g); s.Admitted[PriorityCritical] != 0 || s.InFlight != 0 {
		t.Errorf("stats %+v: a request was granted critical, or a place was not given back", s)
	}
}

// okStatus is an error whose gRPC status is OK: a scope function's bug.
type okStatus struct{}

func (okStatus) Error() string              { return "no error, says the status" }
func (okStatus) GRPCStatus() *status.Status { return status.New(codes.OK, "") }

// TestAttackKeyScopeFails: a scope function that fails refuses the request
// with a clear code and never runs the handler: a status error keeps its
// code, another error (one whose status says OK included) is
// UNAUTHENTICATED. One that panics, under a recovering interceptor outside
// the Guard, gives the place in flight back and leaves no key behind.
func TestAttackKeyScopeFails(t *testing.T) {
	var scopeErr error
	var panics bool
	scope := func(context.Context) (string, error) {
		if panics {
			panic("scope boom")
		}
		return "tenant", scopeErr
	}
	srv := &inventoryServer{}
	g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)), WithKeyScope(scope))
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverUnary)}, g.ServerOptions()...)
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{errors.New("no token"), codes.Unauthenticated},
		{status.Error(codes.PermissionDenied, "not yours"), codes.PermissionDenied},
		{okStatus{}, codes.Unauthenticated},
	} {
		scopeErr = c.err
		if _, err := reserve(t, client, "k"); status.Code(err) != c.want {
			t.Errorf("scope error %T %v: answered %v, want %s", c.err, c.err, err, c.want)
		}
	}
	scopeErr, panics = nil, true
	if _, err := reserve(t, client, "k"); status.Code(err) != codes.Internal {
		t.Errorf("scope panicking: %v, want the recovered INTERNAL", err)
	}
	if n := srv.reserveCalls.Load(); n != 0 {
		t.Errorf("handler ran %d times with a failing scope, want 0", n)
	}
	panics = false
	if _, err := reserve(t, client, "k"); err != nil {
		t.Errorf("the key after the scope's failures: %v, want it free", err)
	}
	if s := stats(t, g); s.InFlight != 0 {
		t.Errorf("%d places in flight not given back", s.InFlight)
	}
}

func recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "panic: %v", r)
		}
	}()
	return h(ctx, req)
}

// TestAttackInterceptorsInstalledTwice: ServerOptions, and the Guard's
// interceptors chained once more by hand (as a server with its own
// InTapHandle would, forgetting ServerOptions already holds them). The
// request is served once: no crash, one place in flight, one claim of
// the key (a second would wait for itself).
func TestAttackInterceptorsInstalledTwice(t *testing.T) {
	srv := &inventoryServer{}
	for _, shedding := range []bool{true, false} {
		p := inventoryPolicy()
		if !shedding {
			p.Shedding = nil
		}
		g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
		if err != nil {
			t.Fatal(err)
		}
		opts := append(g.ServerOptions(), grpc.ChainUnaryInterceptor(g.UnaryInterceptor), grpc.ChainStreamInterceptor(g.StreamInterceptor))
		client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, opts...)))
		if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
			t.Errorf("shedding %v: GetStock: %v", shedding, err)
		}
		key := "twice-" + strconv.FormatBool(shedding)
		first, err := client.ReserveStock(withKey(ctxTimeout(t, time.Second), key), &inventoryv1.ReserveStockRequest{OrderId: key})
		if err != nil {
			t.Fatalf("shedding %v: ReserveStock: %v", shedding, err)
		}
		again, err := client.ReserveStock(withKey(ctxTimeout(t, time.Second), key), &inventoryv1.ReserveStockRequest{OrderId: key})
		if err != nil || again.GetReservationId() != first.GetReservationId() {
			t.Errorf("shedding %v: repeat %v %v, want the replay", shedding, again, err)
		}
		st, err := client.WatchStock(ctxTimeout(t, time.Second), &inventoryv1.WatchStockRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			t.Errorf("shedding %v: WatchStock: %v", shedding, err)
		}
		s := stats(t, g)
		if shedding && (s.Admitted[PriorityHigh] != 1 || s.Admitted[PriorityCritical] != 2 || s.Admitted[PriorityLow] != 1 || s.InFlight != 0) {
			t.Errorf("stats %+v: want each request admitted once and every place given back", s)
		}
	}
}

// TestAttackDeadlineAtMinDeadline: a caller that sends exactly the
// method's MinDeadline arrives with less and is refused before the
// handler; one with a little more runs, and its handler starts with at
// least MinDeadline left.
func TestAttackDeadlineAtMinDeadline(t *testing.T) {
	srv := &inventoryServer{}
	var left time.Duration
	srv.sawCtx = func(ctx context.Context) {
		dl, _ := ctx.Deadline()
		left = time.Until(dl)
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}) // GetStock: MinDeadline 50 ms
	if _, err := client.GetStock(ctxTimeout(t, 50*time.Millisecond), &inventoryv1.GetStockRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("deadline of exactly MinDeadline: %v, want DEADLINE_EXCEEDED", err)
	}
	if n := srv.getCalls.Load(); n != 0 {
		t.Errorf("handler ran %d times with less than MinDeadline left", n)
	}
	if _, err := client.GetStock(ctxTimeout(t, 150*time.Millisecond), &inventoryv1.GetStockRequest{}); err != nil {
		t.Fatal(err)
	}
	if left < 50*time.Millisecond {
		t.Errorf("handler started with %s left, under MinDeadline", left)
	}
	if s := stats(t, g); s.DeadlineRefused != 1 {
		t.Errorf("deadline refusals %d, want 1", s.DeadlineRefused)
	}
}

// TestAttackHostileTimeout: a grpc-timeout of eleven thousand years, of a
// nanosecond, of zero: no crash; the far one runs, the dead ones are
// refused before the handler.
func TestAttackHostileTimeout(t *testing.T) {
	srv := &inventoryServer{}
	g, _, cc := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for _, c := range []struct {
		timeout string
		want    codes.Code
	}{{"99999999H", codes.OK}, {"1n", codes.DeadlineExceeded}, {"0n", codes.DeadlineExceeded}, {"0m", codes.DeadlineExceeded}} {
		_, code, text := rawCall(t, cc.Target(), getStock, &inventoryv1.GetStockRequest{}, time.Second, http.Header{"Grpc-Timeout": {c.timeout}})
		if code != c.want {
			t.Errorf("grpc-timeout %s: %s %q, want %s", c.timeout, code, text, c.want)
		}
	}
	if n := srv.getCalls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	if s := stats(t, g); s.InFlight != 0 {
		t.Errorf("%d places not given back", s.InFlight)
	}
}

// TestAttackScopeAndKeyDoNotCollide: a scope and a key that concatenate
// to the same string ("t1" + "x:y", "t1:x" + "y", and a scope holding the
// separator and a length) stay apart: each runs.
func TestAttackScopeAndKeyDoNotCollide(t *testing.T) {
	srv := &inventoryServer{}
	scope := func(ctx context.Context) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		return strings.Join(md.Get("tenant"), ""), nil
	}
	_, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()}, WithKeyScope(scope))
	pairs := [][2]string{{"t1", "x:y"}, {"t1:x", "y"}, {"t1:x:y", ""}, {"", "t1:x:y"}, {"2:t1", "x:y"}, {"t", "1:x:y"}}
	for _, p := range pairs {
		if p[1] == "" {
			continue // no key: not deduplicated at all
		}
		ctx := metadata.AppendToOutgoingContext(withKey(ctxTimeout(t, time.Second), p[1]), "tenant", p[0])
		if _, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "same"}); err != nil {
			t.Fatalf("scope %q key %q: %v", p[0], p[1], err)
		}
	}
	if n := srv.reserveCalls.Load(); n != 5 {
		t.Errorf("handler ran %d times for 5 distinct (scope, key) pairs, want 5", n)
	}
}
