package server

import (
	"context"
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

// TestAttack23sInnerGuardsShedIsNotKept: "a shed request must not leave
// a claim". Two Guards on one server, the outer deduplicating ReserveStock
// with a FinalCodes that holds RESOURCE_EXHAUSTED (a service whose quota
// answers are final), the inner shedding the service with
// RESOURCE_EXHAUSTED. The inner's shed refusal, this server's refusal of
// this request, came back to the outer as the handler's error with a
// final code: the outer kept it, and the retry, sent after the pushback
// once the load was gone, got the refusal replayed (with
// resilient-replayed) for the whole TTL, the handler never run. A
// refusal by a Guard of this server is never kept: the retry runs.
func TestAttack23sInnerGuardsShedIsNotKept(t *testing.T) {
	outer := inventoryPolicy()
	outer.Methods[1].Dedup.FinalCodes = policy.DefaultFinalCodes | policy.CodesOf(codes.ResourceExhausted)
	inner := inventoryPolicy()
	inner.Shedding = &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1},
		Code: codes.ResourceExhausted, Pushback: 50 * time.Millisecond}
	srv := &inventoryServer{}
	release, holding := make(chan struct{}), make(chan struct{})
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		close(holding)
		<-release
		return &inventoryv1.GetStockResponse{Sku: req.GetSku()}, nil
	}
	g1, g2, client := twoGuardsOn(t, srv, outer, inner)
	held := make(chan error, 1)
	go func() {
		_, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"})
		held <- err
	}()
	<-holding // the inner Guard's one place is taken

	req := &inventoryv1.ReserveStockRequest{OrderId: "o-shed", Sku: "a", Units: 1}
	_, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-shed"), req)
	if d, ok := runtime.Pushback(err, nil); status.Code(err) != codes.ResourceExhausted || !ok || d <= 0 {
		t.Fatalf("under the inner Guard's load: %v; want its RESOURCE_EXHAUSTED with a pushback", err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the request that held the place: %v", err)
	}
	var trailer metadata.MD
	resp, err := client.ReserveStock(withKey(ctxTimeout(t, 2*time.Second), "k-shed"), req, grpc.Trailer(&trailer))
	if err != nil || resp.GetReservationId() == "" {
		t.Fatalf("the retry after the load: %v, %v (trailer %v); want the handler's answer, not the shed refusal replayed", resp, err, trailer)
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1 (the retry)", n)
	}
	if s1, s2 := stats(t, g1), stats(t, g2); s1.Replayed != 0 || s2.Shed[PriorityCritical] != 1 {
		t.Errorf("replays by the outer %d, critical requests shed by the inner %d; want 0 and 1", s1.Replayed, s2.Shed[PriorityCritical])
	}
}
