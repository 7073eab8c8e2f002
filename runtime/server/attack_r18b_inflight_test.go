package server

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestAttackR18bConcurrentBurst: 45 requests released at once (10 unary
// of each priority and 5 low-priority streams, one service, limits low 2,
// normal 4, high 6, critical 8), every admitted one held in its handler.
// Exactly 8 handlers run, never more; no priority gets past its cumulative
// limit; the other 37 are refused at once with UNAVAILABLE and the
// pushback, and counted; every place comes back once they are let go.
func TestAttackR18bConcurrentBurst(t *testing.T) {
	srv := &inventoryServer{}
	release := make(chan struct{})
	var c concurrency
	hold := func(ctx context.Context) {
		c.enter()
		defer c.leave()
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		hold(ctx)
		return &inventoryv1.GetStockResponse{}, nil
	}
	srv.onWatch = func(ctx context.Context) error { hold(ctx); return nil }
	p := inventoryPolicy()
	p.Methods[0].Priority = PriorityCritical // callers lower it
	g, client, _ := guarded(t, srv, []*policy.Server{p})

	start := make(chan struct{})
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	errs := make(chan error, 45)
	call := func(f func(ctx context.Context) error) {
		wg.Go(func() {
			<-start
			err := f(ctxTimeout(t, 10*time.Second))
			switch {
			case err == nil:
			case status.Code(err) == codes.Unavailable:
				if d, ok := runtime.Pushback(err, nil); !ok || d != 250*time.Millisecond || !strings.Contains(err.Error(), "in flight, limit") {
					errs <- err
				}
				refused.Add(1)
			default:
				other.Add(1)
				errs <- err
			}
		})
	}
	for _, prio := range []Priority{PriorityLow, PriorityNormal, PriorityHigh, PriorityCritical} {
		for range 10 {
			call(func(ctx context.Context) error {
				_, err := client.GetStock(runtime.WithPriority(ctx, prio), &inventoryv1.GetStockRequest{})
				return err
			})
		}
	}
	for range 5 {
		call(func(ctx context.Context) error {
			st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		})
	}
	close(start)
	eventually(t, "37 refused, 8 held", func() bool { return refused.Load()+other.Load() == 37 && c.cur.Load() == 8 })
	s := stats(t, g)
	if s.InFlight != 8 {
		t.Errorf("%d in flight while 8 handlers run", s.InFlight)
	}
	var admitted, shed uint64
	for q := PriorityLow; q <= PriorityCritical; q++ {
		admitted += s.Admitted[q]
		shed += s.Shed[q]
		if lim := uint64(p.Shedding.Limits.For(q)); admitted > lim {
			t.Errorf("priorities up to %s: %d admitted, the limit is %d (admitted %v)", q, admitted, lim, s.Admitted)
		}
	}
	if admitted != 8 || shed != 37 {
		t.Errorf("admitted %d shed %d (%v, %v), want 8 and 37", admitted, shed, s.Admitted, s.Shed)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected answer: %v", err)
	}
	if pk := c.peak.Load(); pk != 8 {
		t.Errorf("%d handlers ran at once, the critical limit is 8", pk)
	}
	if n := srv.getCalls.Load() + srv.watchCalls.Load(); n != 8 {
		t.Errorf("handlers ran %d times, want the 8 admitted", n)
	}
	eventually(t, "every place given back", func() bool { return stats(t, g).InFlight == 0 })
}

// TestAttackR18bServerStops: requests running when the server stops. With
// Stop, gRPC cancels their contexts: handlers that honour theirs return,
// and every place comes back. With GracefulStop, they finish, and their
// places come back when they do; a request arriving meanwhile is refused
// by gRPC and takes no place.
func TestAttackR18bServerStops(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		name := "Stop"
		if graceful {
			name = "GracefulStop"
		}
		t.Run(name, func(t *testing.T) {
			srv := &inventoryServer{}
			release := make(chan struct{})
			var running atomic.Int64
			srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
				running.Add(1)
				defer running.Add(-1)
				select {
				case <-release:
				case <-ctx.Done():
					return nil, status.FromContextError(ctx.Err()).Err()
				}
				return &inventoryv1.GetStockResponse{}, nil
			}
			srv.onWatch = func(ctx context.Context) error {
				running.Add(1)
				defer running.Add(-1)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return status.FromContextError(ctx.Err()).Err()
				}
			}
			p := inventoryPolicy()
			p.Shedding.Limits = policy.Limits{Low: 8, Normal: 8, High: 8, Critical: 8}
			g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
			if err != nil {
				t.Fatal(err)
			}
			s := grpc.NewServer(g.ServerOptions()...)
			inventoryv1.RegisterInventoryServiceServer(s, srv)
			client := inventoryv1.NewInventoryServiceClient(dial(t, serveGRPC(t, s)))
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() { _, _ = client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{}) })
				wg.Go(func() {
					if st, err := client.WatchStock(ctxTimeout(t, 5*time.Second), &inventoryv1.WatchStockRequest{}); err == nil {
						_, _ = st.Recv()
					}
				})
			}
			eventually(t, "6 running", func() bool { return running.Load() == 6 && stats(t, g).InFlight == 6 })
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				if graceful {
					s.GracefulStop()
				} else {
					s.Stop()
				}
			}()
			if graceful {
				// The server refuses new streams once it is draining (one
				// sent before the client saw the GOAWAY may still be
				// admitted, and end at its deadline).
				eventually(t, "a new request refused while draining", func() bool {
					_, err := client.GetStock(ctxTimeout(t, 50*time.Millisecond), &inventoryv1.GetStockRequest{})
					return status.Code(err) == codes.Unavailable
				})
				eventually(t, "the 6 still running hold their places", func() bool { return stats(t, g).InFlight == 6 })
				close(release)
			}
			eventually(t, "handlers returned and places came back", func() bool {
				return running.Load() == 0 && stats(t, g).InFlight == 0
			})
			<-stopped
			wg.Wait()
			if !graceful {
				close(release)
			}
			if st := stats(t, g); st.Admitted[PriorityHigh] < 3 || (!graceful && st.Admitted[PriorityHigh] != 3) || st.Admitted[PriorityLow] != 3 {
				t.Errorf("admitted %v, want 3 high (and those of the probes that beat the GOAWAY) and 3 low", st.Admitted)
			}
		})
	}
}

// TestAttackR18bSendBlockedThenCallerGoes: a stream handler blocked in
// Send on flow control (its caller reads nothing) holds its place; when
// the caller cancels, Send fails, the handler returns, and the place comes
// back. The caller sent no deadline and the method no DefaultTimeout here:
// only the cancellation ends it.
func TestAttackR18bSendBlockedThenCallerGoes(t *testing.T) {
	srv := &inventoryServer{}
	var sends, running atomic.Int64
	big := strings.Repeat("x", 64<<10)
	fs := &flooder{inventoryServer: srv, sends: &sends, running: &running, payload: big}
	p := inventoryPolicy()
	p.Methods[2].DefaultTimeout = 0
	g, err := NewGuard([]*policy.Server{p}, WithStore(NewMemoryStore(10)))
	if err != nil {
		t.Fatal(err)
	}
	client := inventoryv1.NewInventoryServiceClient(dial(t, serve(t, fs, g.ServerOptions()...)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{}); err != nil {
		t.Fatal(err)
	}
	// Wait until Send stops getting through: the windows are full.
	last := int64(-1)
	eventually(t, "Send blocked on flow control", func() bool {
		n := sends.Load()
		blocked := n > 0 && n == last
		last = n
		if !blocked {
			time.Sleep(20 * time.Millisecond)
		}
		return blocked
	})
	if s := stats(t, g); s.InFlight != 1 || running.Load() != 1 {
		t.Fatalf("while Send blocks: %d in flight, %d running; want 1 and 1", s.InFlight, running.Load())
	}
	cancel()
	eventually(t, "the handler returned and its place came back", func() bool {
		return running.Load() == 0 && stats(t, g).InFlight == 0
	})
}

// flooder's WatchStock sends payload until Send fails.
type flooder struct {
	*inventoryServer
	sends, running *atomic.Int64
	payload        string
}

func (f *flooder) WatchStock(req *inventoryv1.WatchStockRequest, st inventoryv1.InventoryService_WatchStockServer) error {
	f.running.Add(1)
	defer f.running.Add(-1)
	for {
		if err := st.Send(&inventoryv1.WatchStockResponse{Sku: f.payload}); err != nil {
			return err
		}
		f.sends.Add(1)
	}
}
