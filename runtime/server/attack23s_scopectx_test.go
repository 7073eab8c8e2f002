package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack23sKeyScopeEndedByTheDeadline: a WithKeyScope that asks a
// token verifier with the request's context, which ends (the server's
// DefaultTimeout) before it answers. "A status error keeps its code,
// another becomes UNAUTHENTICATED": the context's error became
// UNAUTHENTICATED, an answer the caller's client never retries, for a
// timeout of the server's own. A context's error keeps its code
// (DEADLINE_EXCEEDED here), the handler does not run and no key is held.
func TestAttack23sKeyScopeEndedByTheDeadline(t *testing.T) {
	p := inventoryPolicy()
	p.Methods[1].DefaultTimeout = 150 * time.Millisecond
	scope := func(ctx context.Context) (string, error) {
		<-ctx.Done() // the verifier never answers in time
		return "", fmt.Errorf("verify token: %w", ctx.Err())
	}
	store := NewMemoryStore(10)
	srv := &inventoryServer{}
	g, client, _ := guarded(t, srv, []*policy.Server{p}, WithStore(store), WithKeyScope(scope))
	start := time.Now()
	_, err := client.ReserveStock(withKey(context.Background(), "k-scope"),
		&inventoryv1.ReserveStockRequest{OrderId: "o-scope", Sku: "a", Units: 1})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("%v after %s; want DEADLINE_EXCEEDED, the server's DefaultTimeout, not UNAUTHENTICATED", err, time.Since(start).Round(time.Millisecond))
	}
	if n, l := srv.reserveCalls.Load(), store.Len(); n != 0 || l != 0 {
		t.Errorf("the handler ran %d times, %d entries in the store; want 0 and 0", n, l)
	}
	if s := stats(t, g); s.StoreErrors != 0 {
		t.Errorf("%d store errors, want 0", s.StoreErrors)
	}
}
