package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// shedConfig is run 3: orders flow steadily while a burst of reports
// saturates inventory.
type shedConfig struct {
	duration              time.Duration // how long orders arrive
	orderRate             int           // ReserveStock calls per second
	reportRate            int           // StockReport calls per second during the burst
	burstFrom, burstTo    time.Duration
	connections           int // inventory's database connections
	orderTime, reportTime time.Duration
}

var defaultShed = shedConfig{
	duration: 10 * time.Second, orderRate: 50, reportRate: 400,
	burstFrom: 3 * time.Second, burstTo: 8 * time.Second,
	connections: 16, orderTime: 10 * time.Millisecond, reportTime: 80 * time.Millisecond,
}

// shedRun is what one server of run 3 measured.
type shedRun struct {
	guarded         bool
	orders, reports *result
	shedInTap       uint64 // refusals counted by the Guard
	// shedLate counts the refusals made after the request was decoded,
	// by the Guard's interceptor rather than its InTapHandle.
	shedLate uint64
	// db is what inventory's database saw: without a Guard, whether the
	// burst saturated it is what decides whether orders suffer.
	db *dbStats
}

// dbStats counts what the database of run 3 saw.
type dbStats struct {
	reports atomic.Int64 // reports that reached it
	// holding is how many reports hold a connection now, mostHolding the
	// most that ever did at once.
	holding, mostHolding atomic.Int64
	mu                   sync.Mutex
	// orderWaits are how long each order that reached the database waited
	// for a connection (until it gave up, for one that did).
	orderWaits []time.Duration
}

// orderWait is the p-th percentile of the orders' waits for a connection.
func (st *dbStats) orderWait(p float64) time.Duration {
	st.mu.Lock()
	w := slices.Clone(st.orderWaits)
	st.mu.Unlock()
	if len(w) == 0 {
		return 0
	}
	slices.Sort(w)
	return w[min(len(w)-1, int(float64(len(w))*p))]
}

// label names the server of the run in the table and the chart.
func (r *shedRun) label() string {
	if r.guarded {
		return "Guard (annotated limits)"
	}
	return "no guard"
}

// isShed reports whether err is a shedding refusal: a status the Guard's
// InTapHandle answers, with the pushback in a RetryInfo detail.
func isShed(err error) bool {
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.ResourceExhausted && st.Code() != codes.Unavailable) {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

// database is inventory's connection pool: a call holds a connection for
// its service time; callers wait in line for one, or until they give up.
// It is what a burst saturates: without shedding, orders queue behind
// reports.
func database(connections int, orderTime, reportTime time.Duration, st *dbStats) server.Behaviour {
	conns := make(chan struct{}, connections)
	return func(ctx context.Context, c server.Call) error {
		report := c.Method == inventoryv1.InventoryService_StockReport_FullMethodName
		if report {
			st.reports.Add(1)
		}
		asked := time.Now()
		waited := func() {
			if !report {
				st.mu.Lock()
				st.orderWaits = append(st.orderWaits, time.Since(asked))
				st.mu.Unlock()
			}
		}
		select {
		case conns <- struct{}{}:
			waited()
		case <-ctx.Done():
			waited()
			return status.FromContextError(ctx.Err()).Err()
		}
		defer func() { <-conns }()
		d := orderTime
		if report {
			d = reportTime
			n := st.holding.Add(1)
			defer st.holding.Add(-1)
			for m := st.mostHolding.Load(); n > m && !st.mostHolding.CompareAndSwap(m, n); m = st.mostHolding.Load() {
			}
		}
		return server.Wait(ctx, d)
	}
}

// runShedding runs the orders and the burst of reports against two
// servers, one without and one with the Guard built from the generated
// InventoryServiceServerPolicy, prints the table and writes the chart.
func runShedding(w io.Writer, c config, sc shedConfig) ([]*shedRun, error) {
	fmt.Fprintf(w, "\nRun 3: load shedding. ReserveStock (priority high) at %d/s for %s; from t=%s to t=%s a burst of StockReport (priority low) at %d/s.\n",
		sc.orderRate, sc.duration, sc.burstFrom, sc.burstTo, sc.reportRate)
	fmt.Fprintf(w, "Inventory has %d database connections: an order holds one %s, a report %s. Orders and reports come from different callers.\n\n",
		sc.connections, sc.orderTime, sc.reportTime)
	runs := []*shedRun{{guarded: false}, {guarded: true}}
	errs := make([]error, len(runs))
	c.each(len(runs), func(i int) { errs[i] = runShedServer(c, sc, runs[i]) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	printShedTable(w, runs)
	var panels []*result
	for _, r := range runs {
		label := r.label()
		r.orders.name, r.reports.name = label+": orders (ReserveStock, high)", label+": reports (StockReport, low)"
		panels = append(panels, r.orders, r.reports)
	}
	chart := filepath.Join(c.out, "cascade-shedding.svg")
	if err := writeChart(chart, "Load shedding: outcomes per second by arrival time (dashed: the burst of reports begins)", panels, sc.burstFrom); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\nchart: %s\n", chart)
	return runs, nil
}

// runShedServer runs the orders, and from sc.burstFrom the burst of reports
// (none when sc.reportRate is 0), against one inventory server, with the
// Guard when r.guarded, and leaves in r what they measured. Orders and
// reports come from different callers: each has its own connection.
func runShedServer(c config, sc shedConfig, r *shedRun) error {
	var opts []grpc.ServerOption
	var stats func() uint64
	var late atomic.Uint64
	if r.guarded {
		g, err := server.NewGuard()
		if err != nil {
			return err
		}
		// Outside the Guard's interceptors, so it sees every request the
		// InTapHandle let through, and counts those the Guard then shed.
		countLate := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			if isShed(err) {
				late.Add(1)
			}
			return resp, err
		}
		opts = append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(countLate)}, g.ServerOptions()...)
		stats = func() uint64 {
			s, _ := g.Stats(inventoryv1.InventoryService_ServiceDesc.ServiceName)
			var n uint64
			for _, v := range s.Shed {
				n += v
			}
			return n
		}
	}
	r.db = &dbStats{}
	srv, err := server.Start("127.0.0.1:0", database(sc.connections, sc.orderTime, sc.reportTime, r.db), opts...)
	if err != nil {
		return err
	}
	defer srv.Stop()
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	reportsCC, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer reportsCC.Close()
	// The order service's client, as annotated.
	orders, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		return err
	}
	// The report jobs: many of them, each within its own bulkhead and
	// rate limit, add up to more than inventory can take; one client
	// without those limits stands for the fleet.
	reports, err := inventoryv1.NewInventoryServiceResilientClient(reportsCC, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			p.Bulkhead, p.RateLimit, p.Breaker = nil, nil, nil
		})},
	})
	if err != nil {
		return err
	}
	var orderID atomic.Int64
	orderCall := func(ctx context.Context) (error, error) {
		id := "o-" + strconv.FormatInt(orderID.Add(1), 10)
		_, err := orders.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: id, Sku: "apple", Units: 1})
		return err, nil
	}
	reportCall := func(ctx context.Context) (error, error) {
		_, err := reports.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "north"})
		return err, nil
	}
	var wg sync.WaitGroup
	r.reports = &result{}
	wg.Go(func() {
		if sc.reportRate == 0 {
			return
		}
		time.Sleep(sc.burstFrom)
		burst := load{rate: sc.reportRate, duration: sc.burstTo - sc.burstFrom, workers: sc.reportRate / 2}
		r.reports = run("reports", burst, reportCall)
		// Align the reports' seconds with the orders'.
		pad := int(sc.burstFrom.Seconds())
		r.reports.perSecond = append(make([][numOutcomes]int, pad), r.reports.perSecond...)
		r.reports.causesPerSecond = append(make([][numOutcomes]int, pad), r.reports.causesPerSecond...)
	})
	r.orders = run("orders", load{rate: sc.orderRate, duration: sc.duration, workers: c.workers}, orderCall)
	wg.Wait()
	if stats != nil {
		r.shedInTap = stats()
		r.shedLate = late.Load()
	}
	return nil
}

func printShedTable(w io.Writer, runs []*shedRun) {
	fmt.Fprintf(w, "%-26s %-8s %6s %6s %6s %8s %9s %6s %8s %8s\n", "server", "calls", "sent", "ok", "shed", "timeout", "bulkhead", "other", "p50", "p99")
	for _, r := range runs {
		label := r.label()
		for i, res := range []*result{r.orders, r.reports} {
			calls := []string{"orders", "reports"}[i]
			other := res.sent - res.counts[outOK] - res.counts[outShed] - res.counts[outTimeout] - res.counts[outBulkheadFull]
			fmt.Fprintf(w, "%-26s %-8s %6d %6d %6d %8d %9d %6d %8s %8s\n", label, calls, res.sent, res.counts[outOK], res.counts[outShed],
				res.counts[outTimeout], res.counts[outBulkheadFull], other, short(res.percentile(0.50)), short(res.percentile(0.99)))
			label = ""
		}
		if r.guarded {
			where := "all in the InTapHandle, before decoding"
			if r.shedLate > 0 {
				where = fmt.Sprintf("%d of them after decoding, in the interceptor", r.shedLate)
			}
			fmt.Fprintf(w, "%-26s %d refusals counted by the Guard (Guard.Stats), %s\n", "", r.shedInTap, where)
		}
	}
	// The refusal as generated from the annotations, not as remembered.
	sh := inventoryv1.InventoryServiceServerPolicy.Shedding
	fmt.Fprintf(w, "(shed: refused at once with %s and a %s pushback; timeout: DEADLINE_EXCEEDED, the 300ms annotated per attempt; bulkhead: refused by the order service's own bulkhead, its 8 permits taken by calls stuck on inventory; other: anything else, or still waiting when arrivals stopped; p50/p99 over completed calls)\n", codename.Of(sh.Code), sh.Pushback)
}
