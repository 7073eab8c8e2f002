package runtime_test

// Attacks on the bulkhead's promises (README, "Bulkhead") and on the
// order of the layers (README, "Order of the layers") through the
// generated inventory client against a real loopback server.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk25lBulkheadClient: GetStock with one 10 s attempt per call, only the
// service's bulkhead bh among the layers (and what edit adds).
func atk25lBulkheadClient(t *testing.T, cc grpc.ClientConnInterface, o inventoryv1.InventoryServiceResilientOptions, bh policy.Bulkhead,
	edit func(p *policy.Service)) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	return atkInventory(t, cc, o, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Budget = nil, nil, nil, nil
		p.Bulkhead = &bh
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
		if edit != nil {
			edit(p)
		}
	})
}

func atk25lWantFull(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, runtime.ErrBulkheadFull) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%s: %v (%v), want RESOURCE_EXHAUSTED matching ErrBulkheadFull", what, err, status.Code(err))
	}
}

// TestAttack25lBulkheadPermitsExactUnder100Callers: 100 callers at once
// on a bulkhead of 8 against a server that holds every call. The server
// never has more than 8 in flight; with max_wait long enough, the other
// 92 wait and all 100 are served once the server lets go; with max_wait
// 0, the 92 are refused at once (RESOURCE_EXHAUSTED, ErrBulkheadFull) and
// never reach the server. Every permit is back at the end.
func TestAttack25lBulkheadPermitsExactUnder100Callers(t *testing.T) {
	for _, wait := range []time.Duration{0, 10 * time.Second} {
		t.Run("max_wait "+wait.String(), func(t *testing.T) {
			atkNoLeak(t)
			release := make(chan struct{})
			fs, cc := startFault(t, atkHold(release))
			readyConn(t, cc)
			c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 8, MaxWait: wait}, nil)
			gate := make(chan struct{})
			var wg sync.WaitGroup
			var ok, full, other atomic.Int32
			for range 100 {
				wg.Go(func() {
					<-gate
					switch err := atk25lGet(context.Background(), c); {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, runtime.ErrBulkheadFull) && status.Code(err) == codes.ResourceExhausted:
						full.Add(1)
					default:
						other.Add(1)
						t.Errorf("call: %v", err)
					}
				})
			}
			close(gate)
			atkWaitFor(t, "8 calls at the server", func() bool { return fs.InFlight() == 8 })
			if wait == 0 {
				atkWaitFor(t, "92 refusals", func() bool { return full.Load() == 92 })
			} else {
				// Every caller is at the bulkhead, 92 of them waiting.
				time.Sleep(100 * time.Millisecond)
			}
			if n, _ := c.Runtime().BulkheadInUse(atkGetStock); n != 8 || fs.InFlight() != 8 || fs.Calls(atkGetStock) != 8 {
				t.Errorf("with the server holding: %d permits taken, %d in flight, %d calls at the server; want 8, 8, 8",
					n, fs.InFlight(), fs.Calls(atkGetStock))
			}
			close(release)
			wg.Wait()
			wantOK, wantFull := int32(8), int32(92)
			if wait > 0 {
				wantOK, wantFull = 100, 0
			}
			if ok.Load() != wantOK || full.Load() != wantFull || other.Load() != 0 {
				t.Errorf("%d served, %d refused, %d otherwise; want %d, %d, 0", ok.Load(), full.Load(), other.Load(), wantOK, wantFull)
			}
			if m := fs.MaxInFlight(); m != 8 {
				t.Errorf("server's max in flight %d, want the 8 permits", m)
			}
			if n := fs.Calls(atkGetStock); n != int(wantOK) {
				t.Errorf("server saw %d calls, want %d", n, wantOK)
			}
			atkWantNoPermits(t, c.Runtime(), atkGetStock, "taken after every call returned")
		})
	}
}

// TestAttack25lBulkheadWaitIsMaxWaitAndTheCallersDeadline: the only permit
// held by a StockReport the server holds, GetStock under overall_timeout
// 100 ms. With max_wait 300 ms a GetStock waits for the permit and is
// refused with RESOURCE_EXHAUSTED after 300 ms, not cut at 100 ms: the
// wait is the bulkhead's, outside the overall limit. With max_wait 5 s, a
// call whose deadline (150 ms) comes first ends at its deadline with
// DEADLINE_EXCEEDED, one whose caller cancels (at 50 ms) ends then with
// CANCELLED, and one that gets the permit after 250 ms of waiting is
// served: its overall_timeout counts from the permit.
func TestAttack25lBulkheadWaitIsMaxWaitAndTheCallersDeadline(t *testing.T) {
	atkNoLeak(t)
	release := make(chan struct{})
	fs, cc := startFault(t, func(ctx context.Context, call server.Call) error {
		if call.Method == atkStockReport {
			return atkHold(release)(ctx, call)
		}
		return nil
	})
	readyConn(t, cc)
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	defer letGo()
	client := func(wait time.Duration) *inventoryv1.InventoryServiceResilientClient {
		c := atk25lBulkheadClient(t, cc, inventoryv1.InventoryServiceResilientOptions{}, policy.Bulkhead{Permits: 1, MaxWait: wait}, func(p *policy.Service) {
			m := atkMethod(p, atkGetStock)
			m.Timeout, m.OverallTimeout = 80*time.Millisecond, 100*time.Millisecond
			r := atkMethod(p, atkStockReport)
			r.Retry, r.Timeout, r.OverallTimeout = nil, 10*time.Second, 0
		})
		inFlight := fs.InFlight()
		wg.Go(func() {
			if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); err != nil {
				t.Errorf("the StockReport holding the permit: %v", err)
			}
		})
		atkWaitFor(t, "the StockReport holding the permit", func() bool { return fs.InFlight() == inFlight+1 })
		return c
	}
	timed := func(ctx context.Context, c *inventoryv1.InventoryServiceResilientClient) (time.Duration, error) {
		begin := time.Now()
		err := atk25lGet(ctx, c)
		return time.Since(begin), err
	}

	short := client(300 * time.Millisecond)
	took, err := timed(context.Background(), short)
	atk25lWantFull(t, err, "waiting 300 ms under overall_timeout 100 ms")
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("refused after %v, want max_wait, 300ms (the overall limit does not bound the wait)", took)
	}

	long := client(5 * time.Second)
	made := time.Now() // the deadline counts from here, a little before timed's start
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	_, err = timed(ctx, long)
	took = time.Since(made)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrBulkheadFull) {
		t.Errorf("deadline 150 ms before max_wait 5 s: %v, want DEADLINE_EXCEEDED", err)
	}
	if took < 150*time.Millisecond || took > 2*time.Second {
		t.Errorf("deadline 150 ms before max_wait 5 s: ended after %v", took)
	}
	ctx, cancel = context.WithCancel(context.Background())
	stop := time.AfterFunc(50*time.Millisecond, cancel)
	took, err = timed(ctx, long)
	stop.Stop()
	cancel()
	if status.Code(err) != codes.Canceled || took > 2*time.Second {
		t.Errorf("cancelled while waiting: %v after %v, want CANCELLED at once", err, took)
	}
	if n := fs.Calls(atkGetStock); n != 0 {
		t.Fatalf("server saw %d GetStock calls, want none: no permit was free", n)
	}

	stop = time.AfterFunc(250*time.Millisecond, letGo)
	defer stop.Stop()
	took, err = timed(context.Background(), long)
	if err != nil || took < 250*time.Millisecond {
		t.Errorf("permit after 250 ms under overall_timeout 100 ms: %v after %v, want served after the wait", err, took)
	}
	wg.Wait()
	atkWantNoPermits(t, short.Runtime(), atkGetStock, "taken on the first client at the end")
	atkWantNoPermits(t, long.Runtime(), atkGetStock, "taken on the second client at the end")
}
