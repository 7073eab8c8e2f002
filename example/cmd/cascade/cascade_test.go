package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCascadeShape runs a shortened demonstration and checks the story it
// tells: unprotected callers queue up, a timeout alone keeps hammering the
// dependency, the full stack spares it and answers fast, and budgeted
// retries add a fraction of the load naive ones do.
func TestCascadeShape(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 4 seconds")
	}
	c := config{
		load:        load{rate: 100, duration: 4 * time.Second, workers: 32},
		latency:     20 * time.Millisecond,
		slowLatency: 2 * time.Second,
		slowAt:      time.Second,
		outageFrom:  time.Second,
		outageTo:    3 * time.Second,
		scenarios:   "none,timeout,full,adaptive",
		outage:      true,
		parallel:    true,
		out:         t.TempDir(),
	}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	rep, err := runAll(io.Discard, c)
	if err != nil {
		t.Fatal(err)
	}
	none, timeout, full := rep.slow[0], rep.slow[1], rep.slow[2]
	if none.counts[outWaiting] < none.sent/3 {
		t.Errorf("no protection: %d of %d still waiting, want the queue to build up", none.counts[outWaiting], none.sent)
	}
	if rep.slowCalls[1] < int64(timeout.sent/2) {
		t.Errorf("timeout only: %d calls reached the slow dependency, want about one per request", rep.slowCalls[1])
	}
	if rep.slowCalls[2] >= rep.slowCalls[1]/2 {
		t.Errorf("full stack: %d calls reached the slow dependency, want far fewer than timeout-only's %d", rep.slowCalls[2], rep.slowCalls[1])
	}
	if full.counts[outWaiting] != 0 || full.counts[outOK]+full.counts[outFallback] != full.sent {
		t.Errorf("full stack: %v of %d; want every request answered, by the dependency or the fallback", full.counts, full.sent)
	}
	if p99 := full.percentile(0.99); p99 > 300*time.Millisecond+50*time.Millisecond+150*time.Millisecond {
		t.Errorf("full stack p99 %v: more than timeout + bulkhead wait allow", p99)
	}
	if adaptive := rep.slow[3]; rep.slowCalls[3] > rep.slowCalls[2] || adaptive.counts[outOK]+adaptive.counts[outFallback] != adaptive.sent {
		t.Errorf("adaptive limit: %d calls reached the slow dependency (full stack: %d), %v of %d; want no more, every request answered",
			rep.slowCalls[3], rep.slowCalls[2], adaptive.counts, adaptive.sent)
	}
	naive, resilient := rep.outageCalls[0], rep.outageCalls[1]
	if throttled := rep.outageCalls[2]; throttled > naive/4 || rep.firstOK[2] < 0 || rep.firstOK[2] > 500*time.Millisecond {
		t.Errorf("outage: the throttled client sent %d calls (naive %d), first success %v after recovery; want a fraction, within 500ms",
			throttled, naive, rep.firstOK[2])
	}
	if naive < 2*int64(c.rate)*2 || resilient > naive/2 {
		t.Errorf("outage: naive retries sent %d calls, the generated client %d; want about 3 per request against a fraction", naive, resilient)
	}
	for _, f := range []string{"cascade-slow.svg", "cascade-outage.svg"} {
		b, err := os.ReadFile(filepath.Join(c.out, f))
		if err != nil || !strings.HasPrefix(string(b), "<svg") {
			t.Errorf("%s: %v", f, err)
		}
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
	if testing.Short() {
		t.Skip("runs for about 4 seconds")
	}
	sc := defaultShed
	sc.duration, sc.burstFrom, sc.burstTo = 4*time.Second, time.Second, 3*time.Second
	c := config{load: load{workers: 32}, parallel: true, out: t.TempDir()}
	runs, err := runShedding(io.Discard, c, sc)
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
	if ok := guarded.orders.counts[outOK]; ok < guarded.orders.sent*98/100 {
		t.Errorf("Guard: %d of %d orders ok (%v); want them all to flow", ok, guarded.orders.sent, guarded.orders.counts)
	}
	if shed := guarded.reports.counts[outShed]; shed < guarded.reports.sent/4 || uint64(shed) > guarded.shedInTap {
		t.Errorf("Guard: %d of %d reports shed, %d refusals counted; want the burst shed, every refusal counted", shed, guarded.reports.sent, guarded.shedInTap)
	}
	if p99, bareP99 := guarded.orders.percentile(0.99), bare.orders.percentile(0.99); p99 > 100*time.Millisecond || p99 > bareP99/2 {
		t.Errorf("orders p99 %v with the Guard, %v without; want the Guard to keep them near the 10ms service time", p99, bareP99)
	}
	if b, err := os.ReadFile(filepath.Join(c.out, "cascade-shedding.svg")); err != nil || !strings.Contains(string(b), ">shed<") {
		t.Errorf("cascade-shedding.svg: %v, or no shed in the legend", err)
	}
}
