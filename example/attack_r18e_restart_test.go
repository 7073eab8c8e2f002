package example_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/redisstore"
)

// restartable is the example server under its Guard on a fixed loopback
// address, with its idempotency entries in a Redis that outlives it,
// which the test stops and starts again on the same address: a replica
// restarted (a deploy, a crash) while calls are in flight.
type restartable struct {
	t     *testing.T
	addr  string
	store rserver.Store
	b     server.Behaviour
	mu    sync.Mutex
	srvs  []*server.Server
	cc    *grpc.ClientConn // the connection of the last client made
}

func newRestartable(t *testing.T, b server.Behaviour) *restartable {
	rs := &restartable{t: t, addr: "127.0.0.1:0", store: redisstore.New(e2eRedis(t), "e2e:"), b: b}
	rs.start()
	rs.addr = rs.current().Addr()
	t.Cleanup(func() { rs.current().Stop() })
	return rs
}

// start serves a new server, with a new Guard, on the address.
func (rs *restartable) start() {
	rs.t.Helper()
	g, err := server.NewGuard(rserver.WithStore(rs.store))
	if err != nil {
		rs.t.Fatal(err)
	}
	srv, err := server.Start(rs.addr, rs.b, g.ServerOptions()...)
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.mu.Lock()
	rs.srvs = append(rs.srvs, srv)
	rs.mu.Unlock()
}

// ready waits, up to 3 s, until the last client's connection is ready
// again (after a restart: a loaded machine may take longer to reconnect
// than a call to fail fast on a connection still down).
func (rs *restartable) ready() {
	rs.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rs.cc.Connect()
	for st := rs.cc.GetState(); st != connectivity.Ready; st = rs.cc.GetState() {
		if !rs.cc.WaitForStateChange(ctx, st) {
			rs.t.Fatalf("the connection to the restarted server is %v after 3s", st)
		}
	}
}

func (rs *restartable) current() *server.Server {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.srvs[len(rs.srvs)-1]
}

// calls sums the calls to method over every server started.
func (rs *restartable) calls(method string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, s := range rs.srvs {
		n += s.Calls(method)
	}
	return n
}

// client dials the address with a short reconnection backoff (gRPC's 1 s
// would make the test wait) and builds the generated client. The connect
// timeout is set apart from the backoff: left at zero, gRPC gives each
// dial and handshake only the current backoff (5 to 20 ms), which a
// loaded machine exceeds ("dial tcp …: i/o timeout", "failed to write
// client preface" at load 15). A dial to the stopped server is refused at
// once, so the longer timeout does not slow the restarts.
func (rs *restartable) client(opts ...runtime.Option) *inventoryv1.InventoryServiceResilientClient {
	rs.t.Helper()
	cc, err := grpc.NewClient(rs.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.5, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: 5 * time.Second,
		}))
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.t.Cleanup(func() { _ = cc.Close() })
	rs.cc = cc
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts})
	if err != nil {
		rs.t.Fatal(err)
	}
	return c
}

// TestAttackR18eRestartGivesEveryPermitBack: eight calls hold the whole
// bulkhead of the generated client when the server restarts. Each ends
// with its answer (a retry that reached the new server) or UNAVAILABLE;
// afterwards every permit is back, the breaker is closed (16 failures at
// most, under minimum_calls 20), and eight calls at once get through the
// bulkhead again, once the connection is ready (at load 8 they were sent
// while it was still reconnecting, failed fast, and opened the breaker).
func TestAttackR18eRestartGivesEveryPermitBack(t *testing.T) {
	release := make(chan struct{})
	rs := newRestartable(t, held(release, getStock, stockReport))
	c := rs.client(longTimeouts)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				_, err = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: fmt.Sprint("r", i)})
			} else {
				_, err = c.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("w", i)})
			}
			errs <- err
		}()
	}
	waitFor(t, "eight calls held by the server", func() bool {
		select {
		case err := <-errs:
			t.Fatalf("a call ended before the restart: %v", err)
		default:
		}
		return rs.current().MaxInFlight() == 8
	})
	if n, _ := c.Runtime().BulkheadInUse(getStock); n != 8 {
		t.Fatalf("%d permits in use with eight calls held, want 8", n)
	}
	rs.current().Stop()
	close(release) // the new server answers at once
	rs.start()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Errorf("a call across the restart: %v, want its answer or UNAVAILABLE", err)
		}
	}
	if n, _ := c.Runtime().BulkheadInUse(getStock); n != 0 {
		t.Errorf("%d permits still in use after every call returned, want 0", n)
	}
	if st, _ := c.Runtime().BreakerState(getStock); st != runtime.StateClosed {
		t.Errorf("breaker %v after at most 16 failures, want closed (minimum_calls 20)", st)
	}
	rs.ready()
	var again sync.WaitGroup
	for i := range 8 {
		again.Add(1)
		go func() {
			defer again.Done()
			if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("after", i)}); err != nil {
				t.Errorf("a call after the restart: %v", err)
			}
		}()
	}
	again.Wait()
}

// TestAttackR18eBreakerAcrossARestart: the server is down long enough
// that the breaker opens (minimum_calls 5, cool-down 100 ms by a policy
// edit); calls then fail fast without reaching the network. After the
// server is back and the cool-down passed, the half-open probes succeed
// and the breaker closes; the new server sees only the probes and the
// calls after them, none of those refused while it was open.
func TestAttackR18eBreakerAcrossARestart(t *testing.T) {
	rs := newRestartable(t, nil)
	c := rs.client(runtime.WithPolicy(func(p *policy.Service) {
		p.Breaker.MinimumCalls, p.Breaker.CoolDown = 5, 100*time.Millisecond
		p.Methods[3].Retry = nil
	}))
	ctx := context.Background()
	if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "before"}); err != nil {
		t.Fatal(err)
	}
	rs.current().Stop()
	var open int
	for i := 0; i < 20; i++ {
		_, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "down"})
		if errorsIsOpen(err) {
			open++
		} else if status.Code(err) != codes.Unavailable {
			t.Fatalf("a call while the server is down: %v, want UNAVAILABLE", err)
		}
	}
	if st, _ := c.Runtime().BreakerState(stockReport); st != runtime.StateOpen || open == 0 {
		t.Fatalf("breaker %v after 20 failed calls, %d refused as open; want open", st, open)
	}
	rs.start()
	waitFor(t, "the cool-down", func() bool {
		st, _ := c.Runtime().BreakerState(stockReport)
		return st != runtime.StateOpen
	})
	for i := range 5 {
		if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("back", i)}); err != nil {
			t.Errorf("call %d after the restart and the cool-down: %v", i, err)
		}
	}
	if st, _ := c.Runtime().BreakerState(stockReport); st != runtime.StateClosed {
		t.Errorf("breaker %v after the probes succeeded, want closed", st)
	}
	if n := rs.current().Calls(stockReport); n != 5 {
		t.Errorf("the new server saw %d calls, want the 5 made after the cool-down", n)
	}
	if n, _ := c.Runtime().BulkheadInUse(stockReport); n != 0 {
		t.Errorf("%d permits in use, want 0", n)
	}
}

// TestAttackR18eReserveStockAcrossARestart: the server is stopped while
// ReserveStock's handler runs (it ignores its context and commits 150 ms
// later); the client retries with the same key on the restarted server,
// a new Guard over the same Redis. The handler runs once over both
// servers and the caller gets its answer. The attempts have 5 s
// (longTimeouts): under the annotated 300 ms, at load 24 the retry
// waiting for the first attempt's outcome was cut by its own timeout.
func TestAttackR18eReserveStockAcrossARestart(t *testing.T) {
	started := make(chan struct{})
	rs := newRestartable(t, slowReserve(150*time.Millisecond, started))
	c := rs.client(longTimeouts)
	go func() {
		<-started
		rs.current().Stop()
		rs.start()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-restart", Sku: "a", Units: 1})
	if err != nil || resp.GetReservationId() != "r-o-restart" {
		t.Errorf("ReserveStock across a restart: %v, %v; want its answer", resp, err)
	}
	time.Sleep(200 * time.Millisecond) // the first handler, if still running, ends
	if n := rs.calls(reserveStock); n != 1 {
		t.Errorf("the handler ran %d times over the two servers, want 1", n)
	}
}

func errorsIsOpen(err error) bool { return errors.Is(err, runtime.ErrCircuitOpen) }

// TestAttackR18eStreamsAcrossARestart: four WatchStock streams hold the
// method's own bulkhead (4 permits) when the server restarts before
// sending anything. Each stream's Recv ends with UNAVAILABLE, every
// permit is back, and four streams open and run to their end on the new
// server.
func TestAttackR18eStreamsAcrossARestart(t *testing.T) {
	release := make(chan struct{})
	rs := newRestartable(t, held(release, watchStock))
	c := rs.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []grpc.ServerStreamingClient[inventoryv1.WatchStockResponse]
	for i := range 4 {
		st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: fmt.Sprint("w", i)})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	waitFor(t, "four streams held by the server", func() bool { return rs.current().MaxInFlight() == 4 })
	if n, _ := c.Runtime().BulkheadInUse(watchStock); n != 4 {
		t.Fatalf("%d permits in use with four streams open, want 4", n)
	}
	rs.current().Stop()
	for i, st := range streams {
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
			t.Errorf("stream %d across the restart: %v, want UNAVAILABLE", i, err)
		}
	}
	if n, _ := c.Runtime().BulkheadInUse(watchStock); n != 0 {
		t.Errorf("%d permits in use after every stream ended, want 0", n)
	}
	close(release)
	rs.start()
	// Once the connection is ready again: at load 8 a stream was opened
	// while the old connection was still being torn down, and failed.
	rs.ready()
	for i := range 4 {
		st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: fmt.Sprint("again", i)})
		if err != nil {
			t.Fatalf("stream %d after the restart: %v", i, err)
		}
		got := 0
		for {
			if _, err := st.Recv(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("stream %d after the restart ended with %v", i, err)
				}
				break
			}
			got++
		}
		if got != 3 {
			t.Errorf("stream %d got %d updates, want 3", i, got)
		}
	}
	if n, _ := c.Runtime().BulkheadInUse(watchStock); n != 0 {
		t.Errorf("%d permits in use after the streams ended, want 0", n)
	}
}
