package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackStreamEndsVersusPlace: a server stream whose handler sends
// until Send fails, reached through a TCP proxy. However the stream ends
// (the client cancels, its deadline passes, the connection is cut, the
// connection stalls until the deadline), the place is held while the
// handler runs and given back when it returns: never more than the limit,
// never a place left behind.
func TestAttackStreamEndsVersusPlace(t *testing.T) {
	for _, end := range []string{"cancel", "deadline", "cut", "stall"} {
		t.Run(end, func(t *testing.T) {
			srv := &inventoryServer{}
			var running atomic.Int64
			g, err := NewGuard([]*policy.Server{inventoryPolicy()}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			ws := &watcher{inventoryServer: srv, running: &running}
			addr := serve(t, ws, g.ServerOptions()...)
			p := tcpproxy.Start(t, addr)
			client := inventoryv1.NewInventoryServiceClient(dial(t, p.Addr()))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := st.Recv(); err != nil {
					t.Fatal(err)
				}
			}
			if s := stats(t, g); s.InFlight != 1 || running.Load() != 1 {
				t.Fatalf("streaming: %d in flight, %d running; want 1 and 1", s.InFlight, running.Load())
			}
			switch end {
			case "cancel":
				cancel()
			case "cut":
				p.Cut()
			case "stall":
				p.Stall()
			}
			start := time.Now()
			eventually(t, "the handler returned and its place came back", func() bool {
				return running.Load() == 0 && stats(t, g).InFlight == 0
			})
			if el := time.Since(start); el > 600*time.Millisecond {
				t.Errorf("place given back %s after the stream ended, want within its 300 ms deadline and a little", el)
			}
			p.Restore()
		})
	}
}

// watcher's WatchStock sends every 2 ms until Send fails or its context
// ends, counting itself while it runs.
type watcher struct {
	*inventoryServer
	running *atomic.Int64
}

func (w *watcher) WatchStock(req *inventoryv1.WatchStockRequest, st inventoryv1.InventoryService_WatchStockServer) error {
	w.running.Add(1)
	defer w.running.Add(-1)
	for i := int64(0); ; i++ {
		if err := st.Send(&inventoryv1.WatchStockResponse{Sku: req.GetSku(), Units: i}); err != nil {
			return err
		}
		select {
		case <-st.Context().Done():
			return st.Context().Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// TestAttackConnectionCutMidDedup: the connection of a deduplicated
// request is cut while its handler runs. A handler that honours its
// context stops before committing, its key is freed, and the caller's
// retry on a new connection runs and commits; one that ignores its context
// commits, its outcome is kept, and the retry replays it. Either way one
// commit, and no place left behind.
func TestAttackConnectionCutMidDedup(t *testing.T) {
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprint("honours context ", honours), func(t *testing.T) {
			srv := &inventoryServer{}
			started := make(chan struct{}, 2)
			var commits atomic.Int64
			srv.onReserve = func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
				started <- struct{}{}
				select {
				case <-time.After(150 * time.Millisecond):
				case <-ctx.Done():
					if honours {
						return nil, status.FromContextError(ctx.Err()).Err()
					}
					time.Sleep(50 * time.Millisecond)
				}
				commits.Add(1)
				return &inventoryv1.ReserveStockResponse{ReservationId: "committed"}, nil
			}
			p := inventoryPolicy()
			p.Methods[1].Dedup.Lease = 300 * time.Millisecond
			g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			proxy := tcpproxy.Start(t, serve(t, srv, g.ServerOptions()...))
			client := inventoryv1.NewInventoryServiceClient(dial(t, proxy.Addr()))
			first := make(chan error, 1)
			go func() {
				_, err := reserve(t, client, "cut-1")
				first <- err
			}()
			<-started
			proxy.Cut()
			if err := <-first; status.Code(err) != codes.Unavailable {
				t.Errorf("caller whose connection was cut: %v, want UNAVAILABLE", err)
			}
			proxy.Restore()
			var resp *inventoryv1.ReserveStockResponse
			eventually(t, "the retry answered", func() bool {
				resp, err = reserve(t, client, "cut-1")
				return err == nil
			})
			if resp.GetReservationId() != "committed" || commits.Load() != 1 {
				t.Errorf("retry: %v, %d commits; want the one commit", resp, commits.Load())
			}
			eventually(t, "places given back", func() bool { return stats(t, g).InFlight == 0 })
		})
	}
}
