package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack22bFinalAnswerWithInvalidUTF8IsKept: a handler answers
// FAILED_PRECONDITION with a message that is not valid UTF-8 (a byte of
// a bytes field or of a database's Latin-1 error printed into it). gRPC
// sends it as it is; the Guard could not serialize the status
// (google.rpc.Status.message is a proto3 string), so it did not keep the
// answer and freed the key: every repeat ran the handler again. The
// answer is kept, its message's invalid bytes replaced with U+FFFD, and
// the repeats are replayed.
func TestAttack22bFinalAnswerWithInvalidUTF8IsKept(t *testing.T) {
	srv := &inventoryServer{}
	srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		return nil, status.Error(codes.FailedPrecondition, "no stock for sku \xff\xfe")
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for i := range 3 {
		_, err := reserve(t, client, "o-utf8")
		if status.Code(err) != codes.FailedPrecondition || !strings.HasPrefix(status.Convert(err).Message(), "no stock for sku ") {
			t.Fatalf("request %d: %v, want the handler's FAILED_PRECONDITION", i, err)
		}
	}
	if n := srv.reserveCalls.Load(); n != 1 {
		t.Errorf("the handler ran %d times for a final answer, want 1", n)
	}
	if s := stats(t, g); s.Replayed != 2 || s.NotKept != 0 {
		t.Errorf("replayed %d, not kept %d; want 2 and 0", s.Replayed, s.NotKept)
	}
}
