package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// tenantOrRefuse scopes keys by the "tenant" header, refusing a request
// without one PERMISSION_DENIED (the service's answer about a caller it
// authenticated, in the default FinalCodes).
func tenantOrRefuse(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("tenant"); len(v) == 1 && v[0] != "" {
		return v[0], nil
	}
	return "", status.Error(codes.PermissionDenied, "no tenant: this caller may not reserve")
}

// TestAttack24cInnerGuardsScopeRefusalIsNotKept: "never keeps one [of the
// inner Guard's refusals] as the request's outcome, whatever its
// FinalCodes hold". Two Guards on one server, each deduplicating
// ReserveStock on a store of its own, the inner one scoping keys by
// tenant (WithKeyScope) and refusing a request without one
// PERMISSION_DENIED. The inner Guard's refusal, made before it claimed
// anything (the operation never ran), came back to the outer as the
// handler's error with a final code: the outer kept it, and the caller's
// retry with its tenant and the same key got PERMISSION_DENIED replayed
// for the TTL, the handler never run.
func TestAttack24cInnerGuardsScopeRefusalIsNotKept(t *testing.T) {
	g1, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)), WithKeyScope(tenantOrRefuse))
	if err != nil {
		t.Fatal(err)
	}
	srv := &inventoryServer{}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(chainedTaps(g1, g2)),
		grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))))
	req := &inventoryv1.ReserveStockRequest{OrderId: "o-scope", Sku: "a", Units: 1}
	if _, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-scope"), req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("without a tenant: %v; want the inner Guard's PERMISSION_DENIED", err)
	}
	var trailer metadata.MD
	ctx := metadata.AppendToOutgoingContext(withKey(ctxTimeout(t, 2*time.Second), "k-scope"), "tenant", "acme")
	resp, err := client.ReserveStock(ctx, req, grpc.Trailer(&trailer))
	if err != nil || resp.GetReservationId() == "" {
		t.Fatalf("the retry with a tenant: %v, %v (trailer %v); want the handler's answer, not the refusal replayed", resp, err, trailer)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1 (the retry)", n)
	}
	if s := stats(t, g1); s.Replayed != 0 {
		t.Errorf("the outer Guard replayed %d, want 0", s.Replayed)
	}
	eventually(t, "both Guards gave their places back", func() bool {
		return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0
	})
}

// TestAttack24cInnerGuardsKeyRefusalsAreNotKept: the inner Guard's other
// refusals of a keyed request before its handler (its dedup reading
// another header, sent twice or too long: INVALID_ARGUMENT), which the
// outer Guard, deduplicating by the usual header on a store of its own,
// kept: the caller's corrected retry, with the same idempotency-key, got
// the refusal replayed, the handler never run.
func TestAttack24cInnerGuardsKeyRefusalsAreNotKept(t *testing.T) {
	const header = "x-order-key"
	for _, tc := range []struct {
		name string
		bad  []string // values of header
	}{
		{"sent twice", []string{"a", "b"}},
		{"too long", []string{strings.Repeat("k", MaxKeyLength+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g1, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			inner := inventoryPolicy()
			inner.Methods[1].Dedup.Header = header
			g2, err := NewGuard([]*policy.Server{inner}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			srv := &inventoryServer{}
			client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(chainedTaps(g1, g2)),
				grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))))
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-hdr", Sku: "a", Units: 1}
			ctx := withKey(ctxTimeout(t, 2*time.Second), "k-hdr")
			for _, v := range tc.bad {
				ctx = metadata.AppendToOutgoingContext(ctx, header, v)
			}
			if _, err := client.ReserveStock(ctx, req); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("with %s %s: %v; want the inner Guard's INVALID_ARGUMENT", header, tc.name, err)
			}
			ctx = metadata.AppendToOutgoingContext(withKey(ctxTimeout(t, 2*time.Second), "k-hdr"), header, "ok")
			var trailer metadata.MD
			if resp, err := client.ReserveStock(ctx, req, grpc.Trailer(&trailer)); err != nil || resp.GetReservationId() == "" {
				t.Fatalf("the corrected retry: %v, %v (trailer %v); want the handler's answer", resp, err, trailer)
			}
			if n := srv.reserveCalls.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
		})
	}
}

// TestAttack24cInnerTapRefusalLeavesNothingOfTheOuter: "a Guard whose
// tap refuses a request gives back the places the taps before it took
// for that request". Two Guards' taps chained, the outer giving GetStock
// (sent without a deadline) its DefaultTimeout of 2 s, the inner shedding
// every high-priority request past one. After N refusals by the inner
// tap, the contexts the refused taps returned (gRPC's refused streams'
// own, which gRPC never cancels and drops) must be done: before, each
// held the outer's DefaultTimeout timer, a child of the connection's
// stream context, until it fired, so that a flood of shed requests
// under a long DefaultTimeout held one timer and context per refusal for
// all of it. Nor may a place of the outer stay taken.
func TestAttack24cInnerTapRefusalLeavesNothingOfTheOuter(t *testing.T) {
	outer := inventoryPolicy()
	outer.Methods[0].DefaultTimeout = time.Hour
	inner := inventoryPolicy()
	inner.Shedding.Limits = policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}
	inner.Shedding.Pushback = 10 * time.Millisecond
	g1, err := NewGuard([]*policy.Server{outer}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGuard([]*policy.Server{inner}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []context.Context
	both := chainedTaps(g1, g2)
	taps := func(ctx context.Context, info *tap.Info) (context.Context, error) {
		ctx, err := both(ctx, info)
		if err != nil {
			mu.Lock()
			refused = append(refused, ctx)
			mu.Unlock()
		}
		return ctx, err
	}
	srv := &inventoryServer{}
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		once.Do(func() { close(holding) })
		<-release
		return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, srv, grpc.InTapHandle(taps),
		grpc.ChainUnaryInterceptor(g1.UnaryInterceptor, g2.UnaryInterceptor))))
	held := make(chan error, 1)
	go func() {
		_, err := client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "held"})
		held <- err
	}()
	<-holding
	const n = 20
	for i := range n {
		if _, err := client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "shed"}); status.Code(err) != codes.Unavailable {
			t.Fatalf("request %d under the inner Guard's load: %v; want its shed UNAVAILABLE", i, err)
		}
	}
	mu.Lock()
	got := append([]context.Context(nil), refused...)
	mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d tap refusals seen, want %d", len(got), n)
	}
	live := 0
	for _, ctx := range got {
		if ctx.Err() == nil {
			live++
		}
	}
	if live != 0 {
		t.Errorf("%d of %d refused requests' contexts still live (the outer Guard's 1h DefaultTimeout timer running); want 0", live, n)
	}
	if s1, s2 := stats(t, g1), stats(t, g2); s1.InFlight != 1 || s2.InFlight != 1 || s2.Shed[PriorityHigh] != n {
		t.Errorf("in flight: outer %d, inner %d; inner shed %d; want 1, 1, %d", s1.InFlight, s2.InFlight, s2.Shed[PriorityHigh], n)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the request that held the place: %v", err)
	}
	eventually(t, "both Guards gave every place back", func() bool {
		return stats(t, g1).InFlight == 0 && stats(t, g2).InFlight == 0
	})
}
