package redisstore

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack24hPlaceHeldWhileTheOutcomeIsRetried: the outcome's write is
// now retried until the entry lapses (3/2 Lease past the last renewal),
// and "a place in flight is held … for a deduplicated request, until its
// outcome is written". Redis cut as the handler returns, under a caller
// deadline far shorter than the lease: the caller gets its deadline, the
// place stays taken past it (no deadline bounds the write: it is for the
// retry's sake), and it comes back by 3/2 Lease past the claim plus one
// write's least bound (StoreTimeout/10), with slack for a loaded machine;
// the outcome is not kept.
func TestAttack24hPlaceHeldWhileTheOutcomeIsRetried(t *testing.T) {
	const lease = 400 * time.Millisecond
	p := tcpproxy.Start(t, startRedis(t).addr)
	ran := make(chan time.Time, 1)
	srv := &reserver{answer: "h", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		ran <- time.Now() // the claim answered just before
		p.Cut()
		return nil
	}}
	pol := reserveStockPolicy(lease, policy.StoreErrorRefuse)
	pol.Shedding = &policy.Shedding{Limits: policy.Limits{Low: 4, Normal: 4, High: 4, Critical: 4}}
	g, c := guarded(t, srv, pol, server.WithStore(New(client(t, p.Addr()), "held24h:")))
	const deadline = 150 * time.Millisecond
	if _, err := reserve(t, c, "h-1", deadline); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the first: %v; want its deadline (the outcome's write is retried past it)", err)
	}
	claimed := <-ran
	if s := stats(t, g); s.InFlight != 1 {
		t.Errorf("just past the caller's deadline: %d in flight, want 1 (held until the outcome is written or given up)", s.InFlight)
	}
	bound := lease*3/2 + server.StoreTimeout/10
	for time.Since(claimed) < bound+time.Second && stats(t, g).InFlight != 0 {
		time.Sleep(5 * time.Millisecond)
	}
	held := time.Since(claimed)
	if s := stats(t, g); s.InFlight != 0 || held > bound+time.Second {
		t.Fatalf("the place held %v after the claim (%d in flight); want it back by %v (3/2 Lease and a write's least bound), a second's slack", held, s.InFlight, bound)
	}
	if held < lease*5/4 {
		t.Errorf("the place came back %v after the claim, before 5/4 Lease: the write was not retried until the entry lapsed", held)
	}
	if s := stats(t, g); s.NotKept != 1 {
		t.Errorf("stats %+v: want the outcome not kept (1)", s)
	}
	p.Restore()
}

// TestAttack24hCallerWithoutDeadlineWaitsForTheWrite: nor does the
// method's DefaultTimeout bound the write: a caller that sent no deadline
// gets the handler's answer once the write is given up (3/2 Lease past
// the claim), not at the DefaultTimeout, and the answer is the
// handler's, not kept.
func TestAttack24hCallerWithoutDeadlineWaitsForTheWrite(t *testing.T) {
	const lease = 400 * time.Millisecond
	p := tcpproxy.Start(t, startRedis(t).addr)
	ran := make(chan time.Time, 1)
	srv := &reserver{answer: "w", hook: func(context.Context, *inventoryv1.ReserveStockRequest) error {
		ran <- time.Now()
		p.Cut()
		return nil
	}}
	pol := reserveStockPolicy(lease, policy.StoreErrorRefuse)
	pol.Methods[0].DefaultTimeout = 150 * time.Millisecond
	g, c := guarded(t, srv, pol, server.WithStore(New(client(t, p.Addr()), "wait24h:")))
	ctx := metadata.AppendToOutgoingContext(context.Background(), runtime.IdempotencyKeyHeader, "w-1")
	resp, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "w-1", Sku: "a", Units: 1})
	waited := time.Since(<-ran)
	if err != nil || resp.GetReservationId() == "" {
		t.Fatalf("the caller: %v, %v; want the handler's answer", resp, err)
	}
	if bound := lease*3/2 + server.StoreTimeout/10; waited < lease*5/4 || waited > bound+time.Second {
		t.Errorf("the answer came %v after the handler ran; want it once the write is given up, by %v (3/2 Lease), a second's slack", waited, bound)
	}
	if s := stats(t, g); s.NotKept != 1 {
		t.Errorf("stats %+v: want the outcome not kept (1)", s)
	}
	p.Restore()
}
