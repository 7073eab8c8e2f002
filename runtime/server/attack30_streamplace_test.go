package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttack30DeafStreamHandlerHoldsItsPlacePastTheCancel: README,
// Priority shedding: "The place in flight is held until the handler
// returns (unary or stream, a panic included); it is not given back when
// the caller's deadline passes or the caller cancels, so a handler that
// outlives its caller still counts against the limit." WatchStock is low
// (Low: 2). Two streams whose handlers ignore their context are
// cancelled by their callers (the handlers see the cancellation); both
// places stay held, a third low stream is shed (UNAVAILABLE with the SHED
// mark, its handler not run) and a high unary call is admitted; once the
// handlers return, the places come back and a new stream is served.
func TestAttack30DeafStreamHandlerHoldsItsPlacePastTheCancel(t *testing.T) {
	srv := &inventoryServer{}
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	var sawCancel atomic.Int64
	srv.onWatch = func(ctx context.Context) error {
		if srv.watchCalls.Load() > 2 {
			return nil
		}
		<-ctx.Done()
		sawCancel.Add(1)
		<-release // deaf: outlives its caller
		return nil
	}
	g, client, _ := guarded(t, srv, []*policy.Server{inventoryPolicy()})
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		_ = st
		eventually(t, "the stream's handler runs", func() bool { return srv.watchCalls.Load() == int64(i+1) })
		cancel()
	}
	eventually(t, "both handlers saw their cancellation", func() bool { return sawCancel.Load() == 2 })
	if s := stats(t, g); s.InFlight != 2 {
		t.Errorf("in flight %d after both callers cancelled, handlers still running; want 2", s.InFlight)
	}
	st, err := client.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{Sku: "a"})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unavailable || !reasons(err)[runtime.ShedReason] {
		t.Errorf("a third low stream: %v (reasons %v); want UNAVAILABLE marked %s", err, reasons(err), runtime.ShedReason)
	}
	if n := srv.watchCalls.Load(); n != 2 {
		t.Errorf("WatchStock ran %d times, want 2: the shed stream never reaches it", n)
	}
	if _, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Errorf("a high call beside two low places: %v", err)
	}
	free()
	eventually(t, "places back once the handlers return", func() bool { return stats(t, g).InFlight == 0 })
	st, err = client.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{Sku: "a"})
	if err == nil {
		_, err = st.Recv()
	}
	if err != nil {
		t.Errorf("a low stream once the places are back: %v", err)
	}
	s := stats(t, g)
	if s.Admitted[PriorityLow] != 3 || s.Shed[PriorityLow] != 1 {
		t.Errorf("low admitted %d, shed %d; want 3 and 1", s.Admitted[PriorityLow], s.Shed[PriorityLow])
	}
}
