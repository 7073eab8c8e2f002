package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18bSeries returns, for the metric family name, the value of each
// series whose method label is method, by the value of label.
func r18bSeries(t *testing.T, reg *prometheus.Registry, name, method, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var by, met string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case label:
					by = l.GetValue()
				case "method":
					met = l.GetValue()
				}
			}
			if met == method {
				out[by] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestAttackR18BHostileStatusCodesGrowNoSeries: a server that answers
// each call with another status code outside the 17 canonical ones
// (gRPC passes any uint32 through) must not grow
// resilient_client_attempts_total by one series per call: the labels stay
// bounded whatever the dependency sends, and the counts still agree with
// the calls the server saw.
func TestAttackR18BHostileStatusCodesGrowNoSeries(t *testing.T) {
	atkNoLeak(t)
	var n atomic.Int32
	srv, cc := startFault(t, func(context.Context, server.Call) error {
		return status.Error(codes.Code(1000+n.Add(1)), "a code of its own")
	})
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
		StockReportFallback: func(context.Context, *inventoryv1.StockReportRequest, error) (*inventoryv1.StockReportResponse, error) {
			return &inventoryv1.StockReportResponse{}, nil
		},
	}, func(p *policy.Service) { p.Breaker = nil })
	const calls = 40
	for range calls {
		if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); err != nil {
			t.Fatalf("the fallback answers every call: %v", err)
		}
	}
	if got := srv.Calls(atkStockReport); got != calls {
		t.Fatalf("server saw %d calls, want %d", got, calls)
	}
	attempts := r18bSeries(t, reg, "resilient_client_attempts_total", "StockReport", "code")
	total := 0.0
	for _, v := range attempts {
		total += v
	}
	if len(attempts) > 1 {
		t.Errorf("%d attempt series for %d calls with non-canonical codes (%v): a hostile server grows the series without bound", len(attempts), calls, attempts)
	}
	if total != calls {
		t.Errorf("attempts counted %v, server saw %d", total, calls)
	}
	if attempts["UNKNOWN"] != calls {
		t.Errorf("attempts by code %v, want all %d under UNKNOWN", attempts, calls)
	}
	fb := r18bSeries(t, reg, "resilient_client_fallbacks_total", "StockReport", "cause")
	if len(fb) != 1 || fb["unknown"] != calls {
		t.Errorf("fallbacks by cause %v, want %d under unknown", fb, calls)
	}
}

// TestAttackR18BAttemptAndRetryCountsAgreeWithTheServer: 24 concurrent
// callers against a server that fails every other call with UNAVAILABLE;
// every attempt the server saw is counted once in attempts_total, by the
// code the server gave, and each retry in retries_total{outcome="made"}.
func TestAttackR18BAttemptAndRetryCountsAgreeWithTheServer(t *testing.T) {
	atkNoLeak(t)
	var n atomic.Int32
	var failed atomic.Int32
	srv, cc := startFault(t, func(context.Context, server.Call) error {
		if n.Add(1)%2 == 0 {
			failed.Add(1)
			return status.Error(codes.Unavailable, "every other call")
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}},
		func(p *policy.Service) {
			p.Breaker, p.Bulkhead = nil, nil
			p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
			r := atkMethod(p, atkGetStock).Retry
			r.MaxAttempts, r.InitialBackoff, r.MaxBackoff = 5, time.Millisecond, 2*time.Millisecond
		})
	const callers = 24
	var wg sync.WaitGroup
	var answered atomic.Int32
	for range callers {
		wg.Go(func() {
			_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
			switch {
			case err == nil:
				answered.Add(1)
			case status.Code(err) != codes.Unavailable:
				t.Errorf("%v, want an answer or the last UNAVAILABLE", err)
			}
		})
	}
	wg.Wait()
	seen := srv.Calls(atkGetStock)
	attempts := r18bSeries(t, reg, "resilient_client_attempts_total", "GetStock", "code")
	if attempts["OK"] != float64(answered.Load()) || attempts["UNAVAILABLE"] != float64(failed.Load()) || len(attempts) != 2 {
		t.Errorf("attempts by code %v; server saw %d calls, %d failed, %d answered", attempts, seen, failed.Load(), answered.Load())
	}
	retries := r18bSeries(t, reg, "resilient_client_retries_total", "GetStock", "outcome")
	if retries["made"] != float64(seen-callers) {
		t.Errorf("retries made %v, want the %d calls the server saw beyond the first of each", retries["made"], seen-callers)
	}
}

// TestAttackR18BHostileMethodNamesGrowNoSeries: calls and streams through
// the client's connection (Client.Conn) with method names the policy does
// not know, as a caller that builds names from input would make, pass
// through uncounted: the labels are the policy's methods, fixed when the
// client is built.
func TestAttackR18BHostileMethodNamesGrowNoSeries(t *testing.T) {
	atkNoLeak(t)
	_, cc := startFault(t, server.Healthy)
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{runtime.WithRegisterer(reg)}}, nil)
	count := func() int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			n += len(mf.GetMetric())
		}
		return n
	}
	if _, err := c.StockReport(context.Background(), &inventoryv1.StockReportRequest{}); err != nil {
		t.Fatal(err)
	}
	before := count()
	conn := c.Runtime().Conn(cc)
	for i := range 30 {
		name := fmt.Sprintf("/example.inventory.v1.InventoryService/Evil%d", i)
		var out inventoryv1.StockReportResponse
		if err := conn.Invoke(context.Background(), name, &inventoryv1.StockReportRequest{}, &out); status.Code(err) != codes.Unimplemented {
			t.Fatalf("%s: %v, want the server's UNIMPLEMENTED", name, err)
		}
		st, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, name+"Stream")
		if err == nil {
			err = st.RecvMsg(&out)
		}
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("%s: %v, want the server's UNIMPLEMENTED", name, err)
		}
	}
	if after := count(); after != before {
		t.Errorf("%d series after 60 calls of unknown methods, %d before", after, before)
	}
}
