package main

import (
	"context"
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
	if adaptive := rep.slow[3]; rep.slowCalls[3] > rep.slowCalls[2] || adaptive.counts[outOK]+adaptive.counts[outFallback] != adaptive.sent {
		t.Errorf("adaptive limit: %d calls reached the slow dependency (full stack: %d), %v of %d; want no more, every request answered",
			rep.slowCalls[3], rep.slowCalls[2], adaptive.counts, adaptive.sent)
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
func TestSheddingShape(t *testing.T) {
	skipShape(t)
	sc := defaultShed
	sc.duration, sc.burstFrom, sc.burstTo = 4*time.Second, time.Second, 3*time.Second
	c := config{load: load{workers: 32}, parallel: true, out: t.TempDir()}
	baseline := probe(t, sc.orderRate, sc.duration, sc.orderTime)
	runs, err := runShedding(io.Discard, c, sc)
	base := baseline()
	if err != nil {
		t.Fatal(err)
	}
	bare, guarded := runs[0], runs[1]
	if bare.orders.counts[outOK] > bare.orders.sent*95/100 {
		t.Errorf("no guard: %d of %d orders ok; want the burst of reports to hurt them", bare.orders.counts[outOK], bare.orders.sent)
	}
	if bare.reports.counts[outShed] != 0 {
		t.Errorf("no guard: %d reports shed", bare.reports.counts[outShed])
	}
	// With the Guard, orders fail no more than the probe's uncontended
	// calls at the same time (none on an idle machine; a loaded one times
	// some out at 300ms) plus 2%.
	if failed, probeFailed := guarded.orders.sent-guarded.orders.counts[outOK], base.sent-base.counts[outOK]; failed > probeFailed+guarded.orders.sent*2/100 {
		t.Errorf("Guard: %d of %d orders ok (%v), the probe's uncontended calls %v; want them all to flow", guarded.orders.counts[outOK], guarded.orders.sent, guarded.orders.counts, base.counts)
	}
	if shed := guarded.reports.counts[outShed]; shed < guarded.reports.sent/4 || uint64(shed) > guarded.shedInTap {
		t.Errorf("Guard: %d of %d reports shed, %d refusals counted; want the burst shed, every refusal counted", shed, guarded.reports.sent, guarded.shedInTap)
	}
	// The table says the refusals were all made in the InTapHandle, before
	// decoding: none reached the Guard's interceptor.
	if guarded.shedLate != 0 {
		t.Errorf("Guard: %d of %d refusals made after decoding, in the interceptor; want all in the InTapHandle", guarded.shedLate, guarded.shedInTap)
	}
	// The orders with the Guard are about as fast as the probe's
	// uncontended calls, made at the same time on the same machine: at most
	// twice their p99 (the orders share their connection and server with
	// 400 refused reports a second, which the probe does not) plus 50ms.
	// Queued behind reports they would see the 300ms timeout and its
	// retries. Not an absolute bound: on a loaded machine scheduling alone
	// puts every call's p99 past 100ms.
	p99, probeP99 := guarded.orders.percentile(0.99), base.percentile(0.99)
	t.Logf("orders p99 %v with the Guard, %v without; the probe's uncontended calls %v (%v)", p99, bare.orders.percentile(0.99), probeP99, base.counts)
	if p99 > 2*probeP99+50*time.Millisecond {
		t.Errorf("orders p99 %v with the Guard, uncontended calls at the same time %v; want the Guard to keep orders near the uncontended latency", p99, probeP99)
	}
	// And what the burst adds to orders, past the uncontended latency, is
	// under half with the Guard what it is without.
	if bareP99 := bare.orders.percentile(0.99); p99-probeP99 > (bareP99-probeP99)/2 {
		t.Errorf("orders p99 %v with the Guard, %v without, %v uncontended; want the Guard to spare orders most of what the burst costs them", p99, bareP99, probeP99)
	}
	if b, err := os.ReadFile(filepath.Join(c.out, "cascade-shedding.svg")); err != nil || !strings.Contains(string(b), ">shed<") {
		t.Errorf("cascade-shedding.svg: %v, or no shed in the legend", err)
	}
}
