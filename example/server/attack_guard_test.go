package server_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	exserver "github.com/go-resilient/resilient/example/server"
)

// cutListener hands out the connections it accepts and closes them all on
// cut: the server's side of a connection dropped in the middle of a call.
type cutListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// TestAttackExampleRetryAcrossCut: the example inventory service behind
// its generated server policy, called by its generated resilient client
// (ReserveStock keyed by order id, retried on UNAVAILABLE). The connection
// is cut while the first attempt's handler runs; the client retries with
// the same key on a new connection. A handler that honours its context is
// cancelled and the retry runs it once more (one completed run); one that
// ignores it completes, and the retry gets its kept answer without running
// (one run). Either way the caller gets the answer, and a later call with
// the same order is replayed.
func TestAttackExampleRetryAcrossCut(t *testing.T) {
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprint("honours context ", honours), func(t *testing.T) {
			// The first run lasts until the cut, not a fixed time: one
			// that honours its context is cancelled by it; one that
			// ignores it completes 50 ms after it, well inside the
			// retry's 300 ms attempt, which waits for it (a fixed 200 ms
			// sleep left the waiting attempt 100 ms: cut at load 15).
			started, cutDone := make(chan struct{}), make(chan struct{})
			var once sync.Once
			behaviour := func(ctx context.Context, c exserver.Call) error {
				if c.Method != inventoryv1.InventoryService_ReserveStock_FullMethodName || c.N > 1 {
					return nil
				}
				once.Do(func() { close(started) })
				if honours {
					return exserver.Wait(ctx, 2*time.Second)
				}
				<-cutDone
				time.Sleep(50 * time.Millisecond)
				return nil
			}
			g, err := exserver.NewGuard()
			if err != nil {
				t.Fatal(err)
			}
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			lis := &cutListener{Listener: inner}
			srv := exserver.Serve(lis, behaviour, g.ServerOptions()...)
			t.Cleanup(srv.Stop)
			cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cc.Close() })
			client, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				<-started
				lis.cut()
				close(cutDone)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req := &inventoryv1.ReserveStockRequest{OrderId: "o-cut", Sku: "a", Units: 1}
			resp, err := client.ReserveStock(ctx, req)
			if err != nil || resp.GetReservationId() != "r-o-cut" {
				t.Fatalf("call across a cut: %v %v, want its answer", resp, err)
			}
			m := inventoryv1.InventoryService_ReserveStock_FullMethodName
			// Cancelled counts the runs whose caller was gone when they
			// ended: the one that ignored its context completed anyway.
			calls, cancelled := srv.Calls(m), srv.Cancelled(m)
			if wantCalls := map[bool]int{true: 2, false: 1}[honours]; calls != wantCalls || cancelled != 1 {
				t.Errorf("handler ran %d times, %d of them for a caller gone; want %d and 1: one completed run", calls, cancelled, wantCalls)
			}
			again, err := client.ReserveStock(ctx, req)
			if err != nil || again.GetReservationId() != resp.GetReservationId() || srv.Calls(m) != calls {
				t.Errorf("a later call with the same order: %v %v after %d runs, want the replay", again, err, srv.Calls(m))
			}
			// The first request holds its place until its outcome is
			// written, and gives it back just after: its waiter may have
			// been answered from that outcome, and this test may have
			// called again, before it does. So the place is given back
			// soon after, not necessarily before the answer arrived.
			s, _ := g.Stats("example.inventory.v1.InventoryService")
			for end := time.Now().Add(time.Second); s.InFlight != 0 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
				s, _ = g.Stats("example.inventory.v1.InventoryService")
			}
			if s.InFlight != 0 || s.Replayed == 0 {
				t.Errorf("stats %+v: want no place held (a second after the answers) and a replay", s)
			}
		})
	}
}
