package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestKeyedStreamRefusalIsLoggedOnce: the README's "Idempotency" says of a
// keyed stream of a deduplicated method that it is refused and "the
// first is logged as an error": three keyed streams of WatchStock (a Dedup,
// its Kind left out) are each refused, and the log holds one error naming
// the method, not three, nor none.
func TestKeyedStreamRefusalIsLoggedOnce(t *testing.T) {
	var log logBuffer
	srv := &inventoryServer{}
	_, client, _ := guarded(t, srv, []*policy.Server{dedupStreamPolicy()}, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	for i := range 3 {
		ctx := metadata.AppendToOutgoingContext(ctxTimeout(t, time.Second), runtime.IdempotencyKeyHeader, "k-log")
		st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Internal {
			t.Fatalf("keyed stream %d: %v; want INTERNAL", i+1, err)
		}
	}
	if n := srv.watchCalls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times; want 0", n)
	}
	got := log.String()
	if n := strings.Count(got, "keyed stream of a deduplicated method refused"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once:\n%s", n, got)
	}
	if !strings.Contains(got, "level=ERROR") || !strings.Contains(got, watchStock) {
		t.Errorf("the log does not hold an error naming %s:\n%s", watchStock, got)
	}
}
