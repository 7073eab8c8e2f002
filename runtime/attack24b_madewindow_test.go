package runtime_test

// Retries × the caller's deadline × the metrics: a retry whose pause (the
// server's pushback) ends before the deadline is decided; the deadline
// may still pass between the pause's end and the attempt, and the retry
// then never goes. README, Observability: retries_total{outcome="made"}
// counts retries made ("the retry attempt went to the dependency"), and
// resilient_client_attempts_total the attempts handed to gRPC; Deadlines:
// after the deadline the caller gets the last real error, as when the
// deadline passes during the pause itself.

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack24bRetryOverBeforeItWentIsNotMade: the server fails every
// GetStock with UNAVAILABLE and a pushback of 20 ms; 150 callers give
// their call 20 ms plus 0 to 2 ms, so that the deadline of many passes
// around the end of the pause: during it, between it and the retry, or
// during the retry. retries_total{outcome="made"} counts the retries
// handed to gRPC (attempts_total beyond the first attempts), no more; a
// caller gets DEADLINE_EXCEEDED only from an attempt the deadline cut
// (attempts_total{code="DEADLINE_EXCEEDED"}), else the last real error,
// UNAVAILABLE. Before, a retry the deadline overtook before it went
// counted as made (74 made for 67 handed to gRPC over 100 calls) and
// gave its caller DEADLINE_EXCEEDED.
func TestAttack24bRetryOverBeforeItWentIsNotMade(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, atkPushback("20"))
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
	}, func(p *policy.Service) {
		m := attack23mBare(p)
		m.Timeout = 3 * time.Second
		m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	})
	const calls = 150
	deadlines := 0
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond+time.Duration(i%40)*50*time.Microsecond)
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		cancel()
		switch status.Code(err) {
		case codes.DeadlineExceeded:
			deadlines++
		case codes.Unavailable:
		default:
			t.Fatalf("call %d: %v, want UNAVAILABLE or DEADLINE_EXCEEDED", i, err)
		}
	}
	got := atk22eSeries(t, reg)
	attempts := got["resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}"] +
		got["resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=GetStock}"]
	if made := got["resilient_client_retries_total{method=GetStock,outcome=made}"]; made != attempts-calls {
		t.Errorf("retries_total{outcome=made} = %v, want %v: the retries handed to gRPC (%v attempts for %d calls)",
			made, attempts-calls, attempts, calls)
	}
	if cut := got["resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=GetStock}"]; float64(deadlines) != cut {
		t.Errorf("%d callers got DEADLINE_EXCEEDED, want %v: one per attempt the deadline cut; the others the last real error", deadlines, cut)
	}
}
