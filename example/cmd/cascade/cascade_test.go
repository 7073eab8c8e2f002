package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCascadeShape runs a shortened demonstration and checks the story it
// tells: unprotected callers queue up, a timeout alone keeps hammering the
// dependency, the breaker opens and spares it, the full stack spares it
// and answers fast (its breaker, its bulkhead and the adaptive limit each
// refusing their share), and budgeted retries add a fraction of the load
// naive ones do.
func TestCascadeShape(t *testing.T) {
	skipShape(t)
	c := config{
		load:        load{rate: 100, duration: 4 * time.Second, workers: 32},
		latency:     20 * time.Millisecond,
		slowLatency: 2 * time.Second,
		slowAt:      time.Second,
		outageFrom:  time.Second,
		outageTo:    3 * time.Second,
		scenarios:   "none,timeout,full,adaptive,breaker",
		outage:      true,
		parallel:    true,
		out:         t.TempDir(),
	}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	// The probe runs beside both runs (each arrives for c.duration and
	// then has a second of grace).
	baseline := probe(t, c.rate, 2*(c.duration+time.Second), c.latency)
	rep, err := runAll(io.Discard, c)
	base := baseline()
	if err != nil {
		t.Fatal(err)
	}
	none, timeout, full := rep.slow[0], rep.slow[1], rep.slow[2]
	for i, r := range rep.slow {
		logRun(t, r)
		t.Logf("  %d calls reached the slow dependency", rep.slowCalls[i])
	}
	for i, r := range rep.outage {
		logRun(t, r)
		t.Logf("  %d calls reached the dependency in the outage, first success %v after", rep.outageCalls[i], rep.firstOK[i])
	}
	logRun(t, base)
	if none.counts[outWaiting] < none.sent/3 {
		t.Errorf("no protection: %d of %d still waiting, want the queue to build up", none.counts[outWaiting], none.sent)
	}
	// Timeout only: every request the caller got to in the slow phase
	// reached the dependency. Counted against the requests it got to (not
	// waiting at the end), not those sent: its 32 workers, each held 300ms
	// by a timed-out call, can take about the 100 requests a second that
	// arrive, and on a loaded machine fewer. The requests of the last
	// second are left out: they may be handled after the phase, in the
	// run's last second of grace.
	var reached int64
	for sec := int(c.slowAt.Seconds()); sec < len(timeout.perSecond)-1; sec++ {
		for o, n := range timeout.perSecond[sec] {
			if outcome(o) != outWaiting {
				reached += int64(n)
			}
		}
	}
	if rep.slowCalls[1] < reached*9/10 || reached < int64(timeout.sent/5) {
		t.Errorf("timeout only: %d calls reached the slow dependency for %d requests handled in the slow phase (%d sent), want about one per request", rep.slowCalls[1], reached, timeout.sent)
	}
	if rep.slowCalls[2] >= rep.slowCalls[1]/2 {
		t.Errorf("full stack: %d calls reached the slow dependency, want far fewer than timeout-only's %d", rep.slowCalls[2], rep.slowCalls[1])
	}
	if full.counts[outWaiting] != 0 || full.counts[outOK]+full.counts[outFallback] != full.sent {
		t.Errorf("full stack: %v of %d; want every request answered, by the dependency or the fallback", full.counts, full.sent)
	}
	// The timeout (300ms) and the bulkhead's wait (50ms), plus what the
	// machine adds to any call at the time (the probe's p99, a few ms when
	// idle) twice, for the call's start and for the wake of its timeout
	// (once fell short by 24ms at load 15), and 100ms of scheduling margin.
	if p99, probeP99 := full.percentile(0.99), base.percentile(0.99); p99 > 300*time.Millisecond+50*time.Millisecond+2*probeP99+100*time.Millisecond {
		t.Errorf("full stack p99 %v (uncontended calls at the time: %v): more than timeout + bulkhead wait allow", p99, probeP99)
	}
	// The adaptive limit adds no calls to the full stack's, give or take
	// one round of the breaker's probes: each scenario's breaker opens and
	// probes at its own moment (at load 27, with the generators 700ms
	// late, 6 against 4).
	probes := int64(inventoryv1.InventoryServiceResilientPolicy.Breaker.HalfOpenProbes)
	if adaptive := rep.slow[3]; rep.slowCalls[3] > rep.slowCalls[2]+probes || adaptive.counts[outOK]+adaptive.counts[outFallback] != adaptive.sent {
		t.Errorf("adaptive limit: %d calls reached the slow dependency (full stack: %d, a round of breaker probes %d), %v of %d; want no more, every request answered",
			rep.slowCalls[3], rep.slowCalls[2], probes, adaptive.counts, adaptive.sent)
	}
	// Each layer the README credits did its part: without it the checks
	// above still pass (the bulkhead alone keeps the full stack's calls
	// under half of timeout-only's), so each is checked by what it refused.
	// The breaker opened (in the full stack too), and timeout + breaker
	// sent under half of timeout-only's calls (the calls before it opened,
	// then its probes).
	breaker := rep.slow[4]
	if breaker.counts[outCircuitOpen] == 0 || rep.slowCalls[4] >= rep.slowCalls[1]/2 {
		t.Errorf("timeout + breaker: %d refused by the open breaker, %d calls reached the slow dependency (timeout only: %d); want the breaker open, under half the calls",
			breaker.counts[outCircuitOpen], rep.slowCalls[4], rep.slowCalls[1])
	}
	if c := full.causes; c[outCircuitOpen] == 0 || c[outBulkheadFull] == 0 {
		t.Errorf("full stack: the fallback answered after %d circuit open, %d bulkhead full, %d timeout; want the breaker and the bulkhead each to refuse some",
			c[outCircuitOpen], c[outBulkheadFull], c[outTimeout])
	}
	if c := rep.slow[3].causes; c[outLimited] == 0 {
		t.Errorf("adaptive limit: the fallback answered after %d adaptive limit, %d circuit open, %d bulkhead full; want the limit to refuse some",
			c[outLimited], c[outCircuitOpen], c[outBulkheadFull])
	}
	// The throttler refuses at most 80 % of the requests: after the
	// recovery one of the first few sends, and its call succeeds. Within
	// 500ms, plus what the machine added to an uncontended call at the
	// time (the probe's p99, a few ms when idle).
	naive, resilient := rep.outageCalls[0], rep.outageCalls[1]
	if throttled, probeP99 := rep.outageCalls[2], base.percentile(0.99); throttled > naive/4 || rep.firstOK[2] < 0 || rep.firstOK[2] > 500*time.Millisecond+probeP99 {
		t.Errorf("outage: the throttled client sent %d calls (naive %d), first success %v after recovery (uncontended calls at the time: %v); want a fraction, within 500ms",
			throttled, naive, rep.firstOK[2], probeP99)
	}
	// Naive retries: each request that failed made its three attempts
	// during the outage (a failure is only answered then), and at least a
	// fifth of the requests that arrived in it failed so. Counted against
	// the requests it failed, not those sent: on a loaded machine the
	// caller gets to fewer of the 100 a second that arrive (232 calls at
	// load 15, against 2 x 200 for the requests sent).
	failed := int64(rep.outage[0].counts[outUnavailable])
	t.Logf("outage: naive %d calls for %d failed requests, generated %d, throttled %d (first success %v after recovery)", naive, failed, resilient, rep.outageCalls[2], rep.firstOK[2])
	if naive < 3*failed || failed < int64(c.rate)*int64((c.outageTo-c.outageFrom)/time.Second)/5 || resilient > naive/2 {
		t.Errorf("outage: naive retries sent %d calls for %d failed requests, the generated client %d; want 3 per request against a fraction", naive, failed, resilient)
	}
	for _, f := range []string{"cascade-slow.svg", "cascade-outage.svg"} {
		b, err := os.ReadFile(filepath.Join(c.out, f))
		if err != nil || !strings.HasPrefix(string(b), "<svg") {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// skipShape skips a shape test with -short (each runs for about 4
// seconds) and with the race detector. The shapes are measurements of
// load the demonstration generates: under the race detector, on the two
// shared cores of CI beside other packages' tests, the machine cannot
// generate it (the burst of reports falls short, so orders without a
// Guard are not hurt) nor answer within the annotated 300ms, and the
// shape is the detector's, not the design's. `go test ./...` without
// -race, CI's first step, runs them: the demonstration as `go run`
// runs it, with the latency bounds relative to the probe.
func skipShape(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs for about 4 seconds")
	}
	if raceDetector {
		t.Skip("a measurement of load: run without -race (CI's go test ./... step does)")
	}
}

// probe measures, beside a run and for as long, what the machine adds to an
// ordinary call: it sends rate ReserveStock calls per second through the
// generated client to a server of its own that answers each after service,
// with no contention for anything but the CPU. Its latencies are the
// baseline the shape tests compare with: on an idle machine their p99 is
// the service time, on a loaded one (two cores, the race detector, other
// packages' tests beside) it is what scheduling adds to every call of the
// run, protected or not. wait returns it once the run is over.
func probe(t *testing.T, rate int, duration, service time.Duration) (wait func() *result) {
	t.Helper()
	srv, err := server.Start("127.0.0.1:0", server.Slow(service))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	inv, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		cc.Close()
		srv.Stop()
		t.Fatal(err)
	}
	done := make(chan *result, 1)
	go func() {
		done <- run("probe", load{rate: rate, duration: duration, workers: 32}, func(ctx context.Context) (error, error) {
			_, err := inv.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "probe", Sku: "apple", Units: 1})
			return err, nil
		})
	}()
	return func() *result {
		r := <-done
		cc.Close()
		srv.Stop()
		return r
	}
}

// logRun logs what one scenario measured, for a failure's diagnosis.
func logRun(t *testing.T, r *result) {
	t.Helper()
	var counts, causes []string
	for o := range numOutcomes {
		if n := r.counts[o]; n > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", outcomeNames[o], n))
		}
		if n := r.causes[o]; n > 0 {
			causes = append(causes, fmt.Sprintf("%s %d", outcomeNames[o], n))
		}
	}
	t.Logf("%s: %d sent over %v (generator at most %v late): %s; fallback after %s; p50 %v p99 %v",
		r.name, r.sent, r.lastArrival.Round(time.Millisecond), r.late.Round(time.Millisecond), strings.Join(counts, ", "), strings.Join(causes, ", "),
		r.percentile(0.5).Round(time.Millisecond), r.percentile(0.99).Round(time.Millisecond))
}

func TestFlagsAreChecked(t *testing.T) {
	bad := []config{
		{load: load{rate: 0, duration: time.Second, workers: 1}, outageFrom: 0, outageTo: time.Second, scenarios: "none"},
		{load: load{rate: 1, duration: time.Second, workers: 1}, outageFrom: 0, outageTo: time.Second, scenarios: "nope"},
		{load: load{rate: 1, duration: time.Second, workers: 1}, outageFrom: time.Second, outageTo: 0, scenarios: "none"},
	}
	for _, c := range bad {
		if err := c.check(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestSheddingShape runs a shortened run 3: without a Guard, orders suffer
// from the burst of reports; with it, the reports are shed at once and
// the orders flow at their normal latency.
//
// Normal is what the same orders see at the same time from a third server,
// Guarded like the second, that gets no burst (calm): on a loaded machine
// scheduling alone puts every call's p99 past 100ms and times some out,
// and the three servers share the process and its cores, so the calm
// orders stall when the others do. The database of each server measures
// what the Guard is for, which no load on the machine blurs: how long
// orders wait for a connection, and how many reports hold one at once.
func TestSheddingShape(t *testing.T) {
	skipShape(t)
	sc := defaultShed
	sc.duration, sc.burstFrom, sc.burstTo = 4*time.Second, time.Second, 3*time.Second
	c := config{load: load{workers: 32}, parallel: true, out: t.TempDir()}
	calm := &shedRun{guarded: true}
	calmDone := make(chan error, 1)
	go func() {
		sc := sc
		sc.reportRate = 0
		calmDone <- runShedServer(c, sc, calm)
	}()
	runs, err := runShedding(io.Discard, c, sc)
	if err := <-calmDone; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	bare, guarded := runs[0], runs[1]
	calm.orders.name = "calm (Guard, no burst): orders"
	for _, r := range []*shedRun{bare, guarded, calm} {
		logRun(t, r.orders)
		if r.reports.sent > 0 {
			logRun(t, r.reports)
		}
		t.Logf("  its database: %d reports, at most %d holding a connection at once; orders waited for one p50 %v, p99 %v, at most %v",
			r.db.reports.Load(), r.db.mostHolding.Load(), r.db.orderWait(0.5), r.db.orderWait(0.99), r.db.orderWait(1))
	}
	if bare.orders.counts[outOK] > bare.orders.sent*95/100 {
		t.Errorf("no guard: %d of %d orders ok; want the burst of reports to hurt them (at most %d reports held a connection at once, of %d)",
			bare.orders.counts[outOK], bare.orders.sent, bare.db.mostHolding.Load(), sc.connections)
	}
	if bare.reports.counts[outShed] != 0 {
		t.Errorf("no guard: %d reports shed", bare.reports.counts[outShed])
	}
	// What the Guard does, at the database: reports never hold more
	// connections than the annotated low limit lets in flight (without it
	// they take all 16), so orders never wait for one behind them: their
	// own bulkhead lets at most 8 in flight, and 8 + 8 connections are
	// there. The wait an order may see is another order's 10ms; without
	// the Guard, orders wait until their 300ms attempt gives up. Neither
	// depends on how loaded the machine is.
	low := int64(inventoryv1.InventoryServiceServerPolicy.Shedding.Limits.Low)
	if most := guarded.db.mostHolding.Load(); most > low {
		t.Errorf("Guard: %d reports held a database connection at once; want at most the low limit, %d", most, low)
	}
	if w := guarded.db.orderWait(0.99); w > sc.orderTime {
		t.Errorf("orders' p99 wait for a database connection %v with the Guard (%v without, %v with no burst); want at most an order's %v",
			w, bare.db.orderWait(0.99), calm.db.orderWait(0.99), sc.orderTime)
	}
	// The machine's worst stall in the run: how late the order generators
	// were for their schedule (a few ms when idle, 370ms seen at load 18).
	// Calls alive during it may time out or go slow in one run and not in
	// another: the end-to-end relations below allow it once.
	stall := max(bare.orders.late, guarded.orders.late, calm.orders.late)
	// With the Guard, orders fail no more than the calm ones at the same
	// time (none on an idle machine; a loaded one times some out at 300ms)
	// plus 2%, plus the orders that arrive in one stall. Not counted: the
	// orders their own client's breaker refused. A stall's timeouts may
	// open it in one run and not in the other, and it then refuses every
	// order for its 2s cool-down (68 in the Guarded run, none in the calm
	// one, at load 14 with the generators 270ms late). Without the Guard,
	// orders fail for want of a connection, on their bulkhead (every permit
	// waiting on inventory) and their timeout, which are counted.
	stalled := int((stall*time.Duration(sc.orderRate) + time.Second - 1) / time.Second)
	failed := guarded.orders.sent - guarded.orders.counts[outOK] - guarded.orders.counts[outCircuitOpen]
	calmFailed := calm.orders.sent - calm.orders.counts[outOK] - calm.orders.counts[outCircuitOpen]
	if failed > calmFailed+guarded.orders.sent*2/100+stalled {
		t.Errorf("Guard: %d of %d orders ok (%v), the calm server's %v, %d orders arrive in the worst stall; want them all to flow",
			guarded.orders.counts[outOK], guarded.orders.sent, guarded.orders.counts, calm.orders.counts, stalled)
	}
	// The Guard refused more of the reports that reached the server than
	// it let into the database (at most 8 in flight of 80ms each let 100 a
	// second through of the 400 that arrive); the reports answered were
	// mostly refusals, and the client saw no refusal the Guard did not
	// count. Counted against the reports that reached the server, and
	// those answered, not those sent: on a loaded machine the report
	// client times some out before they leave it, and others before their
	// refusal reaches it (at load 27, 347 refused and none seen so).
	shed, answered := guarded.reports.counts[outShed], guarded.reports.counts[outOK]+guarded.reports.counts[outShed]
	if in := uint64(guarded.db.reports.Load()); guarded.shedInTap == 0 || guarded.shedInTap < in || shed < answered/2 || uint64(shed) > guarded.shedInTap {
		t.Errorf("Guard: %d refusals counted, %d reports let into the database; the client saw %d of %d reports shed (%d answered); want the burst shed, every refusal counted",
			guarded.shedInTap, in, shed, guarded.reports.sent, answered)
	}
	// The table says the refusals were all made in the InTapHandle, before
	// decoding: none reached the Guard's interceptor.
	if guarded.shedLate != 0 {
		t.Errorf("Guard: %d of %d refusals made after decoding, in the interceptor; want all in the InTapHandle", guarded.shedLate, guarded.shedInTap)
	}
	// The orders with the Guard are about as fast as the calm ones: at
	// most twice their p99 (the server handles 400 refused reports a
	// second, the calm one none) plus 50ms. Queued behind reports they
	// would see the 300ms timeout and its retries.
	p99, calmP99 := guarded.orders.percentile(0.99), calm.orders.percentile(0.99)
	if p99 > 2*calmP99+50*time.Millisecond {
		t.Errorf("orders p99 %v with the Guard, %v with no burst at the same time; want the Guard to keep orders near their normal latency", p99, calmP99)
	}
	// And what the burst adds to orders, past the calm latency, is under
	// half with the Guard what it is without, give or take the worst stall.
	if bareP99 := bare.orders.percentile(0.99); p99-calmP99 > (bareP99-calmP99)/2+stall {
		t.Errorf("orders p99 %v with the Guard, %v without, %v with no burst, worst stall %v; want the Guard to spare orders most of what the burst costs them", p99, bareP99, calmP99, stall)
	}
	// The chart's legend names the refusals when the report client saw
	// any (it does unless the machine timed out every one of them).
	if b, err := os.ReadFile(filepath.Join(c.out, "cascade-shedding.svg")); err != nil || strings.Contains(string(b), ">shed<") != (shed > 0) {
		t.Errorf("cascade-shedding.svg: %v, or shed in the legend is not %v (%d reports seen shed)", err, shed > 0, shed)
	}
}
