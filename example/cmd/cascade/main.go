// Command cascade reproduces, over real gRPC on loopback, the cascading
// failure of a caller whose dependency turns slow, and shows what each layer
// of the generated resilient client changes.
//
// Run 1 (slow dependency): a caller with 32 workers receives 100 requests/s
// for 12 s; the inventory service answers GetStock in 40 ms, and from t = 3 s
// in 4 s. Four scenarios: no protection, timeout only, timeout + breaker, and
// the full stack annotated in inventory.proto (timeout, breaker, bulkhead,
// retry budget, fallback).
//
// Run 2 (outage): the dependency answers UNAVAILABLE from t = 3 s to
// t = 8 s. Naive retries (3 attempts, no budget, no breaker) against the
// generated client as annotated (breaker, 10 % retry budget).
//
// Run 3 (load shedding): orders (ReserveStock, priority high) flow steadily
// while a burst of reports (StockReport, priority low) saturates
// inventory's database; once without a Guard, once with the Guard built from
// the generated InventoryServiceServerPolicy.
//
// Each run prints a table and writes an SVG chart of outcomes per second.
//
//	go run ./example/cmd/cascade
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

type config struct {
	load
	latency, slowLatency time.Duration
	slowAt               time.Duration
	outageFrom, outageTo time.Duration
	scenarios            string
	outage, parallel     bool
	out                  string
	metricsAddr, scrape  string
	scrapeAt             time.Duration
	shed                 bool
	shedConfig           shedConfig
}

func main() {
	var c config
	flag.IntVar(&c.rate, "rate", 100, "requests per `second` arriving at the caller")
	flag.DurationVar(&c.duration, "duration", 12*time.Second, "how long requests arrive, per scenario")
	flag.IntVar(&c.workers, "workers", 32, "goroutines of the caller (its thread pool)")
	flag.DurationVar(&c.latency, "latency", 40*time.Millisecond, "the dependency's healthy latency")
	flag.DurationVar(&c.slowLatency, "slow-latency", 4*time.Second, "the dependency's latency once slow")
	flag.DurationVar(&c.slowAt, "slow-at", 3*time.Second, "when the dependency turns slow")
	flag.DurationVar(&c.outageFrom, "outage-from", 3*time.Second, "start of the UNAVAILABLE outage (run 2)")
	flag.DurationVar(&c.outageTo, "outage-to", 8*time.Second, "end of the outage (run 2)")
	flag.StringVar(&c.scenarios, "scenarios", "none,timeout,breaker,full,adaptive", "scenarios of run 1, comma-separated, among none, timeout, breaker, full, adaptive")
	flag.BoolVar(&c.outage, "outage", true, "also run the outage comparison (run 2)")
	flag.BoolVar(&c.parallel, "parallel", true, "run the scenarios of a run at the same time, each against its own server (false: one after another)")
	flag.StringVar(&c.out, "out", "cascade-out", "`directory` for the SVG charts")
	flag.StringVar(&c.metricsAddr, "metrics-addr", "", "serve the full-stack client's Prometheus metrics on http://`host:port`/metrics during run 1")
	flag.StringVar(&c.scrape, "scrape", "", "write a scrape of the full-stack client's metrics, taken -scrape-at into run 1, to `file`")
	flag.DurationVar(&c.scrapeAt, "scrape-at", 6*time.Second, "when in run 1 the -scrape is taken")
	c.shedConfig = defaultShed
	flag.BoolVar(&c.shed, "shedding", true, "also run the load-shedding comparison (run 3)")
	flag.IntVar(&c.shedConfig.reportRate, "report-rate", c.shedConfig.reportRate, "StockReport calls per `second` during the burst of run 3")
	flag.Parse()
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "cascade:", err)
		os.Exit(2)
	}
	if _, err := runAll(os.Stdout, c); err != nil {
		fmt.Fprintln(os.Stderr, "cascade:", err)
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.rate < 1:
		return fmt.Errorf("-rate %d: must be at least 1", c.rate)
	case c.workers < 1:
		return fmt.Errorf("-workers %d: must be at least 1", c.workers)
	case c.duration < time.Second:
		return fmt.Errorf("-duration %s: must be at least 1s", c.duration)
	case c.outageFrom >= c.outageTo || c.outageTo > c.duration:
		return fmt.Errorf("-outage-from %s -outage-to %s: need from < to <= -duration", c.outageFrom, c.outageTo)
	}
	for _, s := range strings.Split(c.scenarios, ",") {
		if _, ok := scenarioPolicies[s]; !ok {
			return fmt.Errorf("-scenarios: unknown scenario %q; choose among none, timeout, breaker, full, adaptive", s)
		}
	}
	return nil
}

// scenarioPolicies edit the annotated InventoryService policy for each
// scenario of run 1; nil means the plain generated client, no runtime.
var scenarioPolicies = map[string]func(*policy.Service){
	"none": nil,
	"timeout": func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		noRetries(p)
	},
	"breaker": func(p *policy.Service) {
		p.Bulkhead = nil
		noRetries(p)
	},
	"full": func(*policy.Service) {},
	// The full stack with an adaptive concurrency limit at its defaults,
	// under the bulkhead's 8 permits (the ceiling).
	"adaptive": func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{}
	},
}

var scenarioTitles = map[string]string{
	"none":     "no protection",
	"timeout":  "timeout 300ms",
	"breaker":  "timeout + breaker",
	"full":     "full stack (+bulkhead, budget, fallback)",
	"adaptive": "full stack + adaptive limit",
}

func noCache(p *policy.Service) {
	for i := range p.Methods {
		p.Methods[i].Cache = nil
	}
}

func noRetries(p *policy.Service) {
	for i := range p.Methods {
		p.Methods[i].Retry = nil
	}
}

// dependency is one example server whose behaviour follows the clock of a
// run, with the calls that reached it per phase.
type dependency struct {
	srv   *server.Server
	cc    *grpc.ClientConn
	start atomic.Pointer[time.Time]
	// calls in [from, to) of the run
	from, to time.Duration
	inPhase  atomic.Int64
}

func startDependency(phase func(elapsed time.Duration) server.Behaviour, from, to time.Duration) (*dependency, error) {
	d := &dependency{from: from, to: to}
	now := time.Now()
	d.start.Store(&now)
	srv, err := server.Start("127.0.0.1:0", func(ctx context.Context, c server.Call) error {
		elapsed := time.Since(*d.start.Load())
		if elapsed >= d.from && elapsed < d.to {
			d.inPhase.Add(1)
		}
		return phase(elapsed)(ctx, c)
	})
	if err != nil {
		return nil, err
	}
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	d.srv, d.cc = srv, cc
	return d, nil
}

func (d *dependency) markStart() {
	now := time.Now()
	d.start.Store(&now)
}

func (d *dependency) close() {
	d.cc.Close()
	d.srv.Stop()
}

var request = &inventoryv1.GetStockRequest{Sku: "apple"}

// plainCall calls through the plain generated client, without deadline.
func plainCall(cc grpc.ClientConnInterface) call {
	client := inventoryv1.NewInventoryServiceClient(cc)
	return func(ctx context.Context) (error, error) {
		_, err := client.GetStock(ctx, request)
		return err, nil
	}
}

// resilientCall calls through the generated resilient client, under the
// annotated policy changed by edit; with fallback, an approximate stock
// answers failed calls.
func resilientCall(cc grpc.ClientConnInterface, edit func(*policy.Service), fallback bool, extra ...runtime.Option) (call, error) {
	// The demonstration calls GetStock for one product over and over: with
	// the annotated cache nearly every call would be answered from it, and
	// the scenarios would show the cache rather than the layers they
	// compare. The cache is left out of every scenario.
	opts := inventoryv1.InventoryServiceResilientOptions{Runtime: append([]runtime.Option{runtime.WithPolicy(edit), runtime.WithPolicy(noCache)}, extra...)}
	if fallback {
		opts.GetStockFallback = func(ctx context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			if slot, ok := ctx.Value(causeKey{}).(*error); ok {
				*slot = err // for the tally
			}
			// A real caller would answer with the last stock it saw, marked
			// approximate.
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		}
	}
	client, err := inventoryv1.NewInventoryServiceResilientClient(cc, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (error, error) {
		var cause error
		_, err := client.GetStock(context.WithValue(ctx, causeKey{}, &cause), request)
		return err, cause
	}, nil
}

// causeKey keys the slot where the fallback leaves the error it answered.
type causeKey struct{}

// report is what runAll measured, for tests.
type report struct {
	slow, outage           []*result
	slowCalls, outageCalls []int64         // calls that reached the dependency during the fault
	firstOK                []time.Duration // per outage client, after recovery; -1 for none
	shed                   []*shedRun      // run 3: without, then with the Guard
}

// runShed runs run 3 when asked.
func (c config) runShed(w io.Writer, rep *report) error {
	if !c.shed {
		return nil
	}
	runs, err := runShedding(w, c, c.shedConfig)
	rep.shed = runs
	return err
}

func runAll(w io.Writer, c config) (*report, error) {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return nil, err
	}
	rep := &report{}
	names := strings.Split(c.scenarios, ",")
	stopMetrics, err := c.exposeMetrics(w)
	if err != nil {
		return nil, err
	}
	defer stopMetrics()
	fmt.Fprintf(w, "Run 1: slow dependency. %d requests/s for %s into %d workers; GetStock takes %s, from t=%s %s.\n\n",
		c.rate, c.duration, c.workers, c.latency, c.slowAt, c.slowLatency)
	slow := func(elapsed time.Duration) server.Behaviour {
		if elapsed >= c.slowAt {
			return server.Slow(c.slowLatency)
		}
		return server.Slow(c.latency)
	}
	results, deps, err := runScenarios(c, names, slow, c.slowAt, c.duration, func(name string, cc grpc.ClientConnInterface) (call, error) {
		edit := scenarioPolicies[name]
		if edit == nil {
			return plainCall(cc), nil
		}
		if name == "adaptive" {
			return resilientCall(cc, edit, true)
		}
		if name == "full" {
			// Only the full stack is measured: every scenario calls the
			// same dependency, and their series would add up.
			return resilientCall(cc, edit, true, runtime.WithRegisterer(metrics))
		}
		return resilientCall(cc, edit, false)
	})
	if err != nil {
		return nil, err
	}
	rep.slow = results
	for _, d := range deps {
		rep.slowCalls = append(rep.slowCalls, d.inPhase.Load())
	}
	printSlowTable(w, results, deps, c)
	chart := filepath.Join(c.out, "cascade-slow.svg")
	if err := writeChart(chart, "Slow dependency: outcomes per second by arrival time", results, c.slowAt); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\nchart: %s\n", chart)

	if !c.outage {
		return rep, c.runShed(w, rep)
	}
	fmt.Fprintf(w, "\nRun 2: outage. GetStock answers UNAVAILABLE from t=%s to t=%s, else in %s.\n\n", c.outageFrom, c.outageTo, c.latency)
	outage := func(elapsed time.Duration) server.Behaviour {
		if elapsed >= c.outageFrom && elapsed < c.outageTo {
			return server.Fail(codes.Unavailable)
		}
		return server.Slow(c.latency)
	}
	naive := func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		// No budget: every failed call may retry twice.
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1 << 30, Window: 10 * time.Second}
	}
	// The throttled client is the generated one with the client-side
	// throttler in front and no breaker: in a total outage the breaker
	// would open on the throttler's probes too and keep the recovery out
	// for its cool-down. The window holds 25 requests at 100/s, and is
	// what sets how many are refused after the recovery (about two
	// windows' worth fade out); a refusal of at most 80 % (Envoy's
	// admission control default) sends a fifth of the requests as probes.
	throttle := policy.Throttle{K: 3, Window: 250 * time.Millisecond, MaxRefusal: 0.8}
	throttled := func(p *policy.Service) {
		p.Breaker = nil
		p.ClientThrottle = &throttle
	}
	onames := []string{"naive", "resilient", "throttled"}
	firstOK := map[string]*atomic.Int64{"naive": {}, "resilient": {}, "throttled": {}}
	runStart := map[string]*atomic.Pointer[time.Time]{"naive": {}, "resilient": {}, "throttled": {}}
	oresults, odeps, err := runScenarios(c, onames, outage, c.outageFrom, c.outageTo,
		func(name string, cc grpc.ClientConnInterface) (call, error) {
			edit := func(*policy.Service) {}
			switch name {
			case "naive":
				edit = naive
			case "throttled":
				edit = throttled
			}
			inner, err := resilientCall(cc, edit, false)
			if err != nil {
				return nil, err
			}
			first, startp := firstOK[name], runStart[name]
			return func(ctx context.Context) (error, error) {
				err, cause := inner(ctx)
				if err == nil {
					if s := startp.Load(); s != nil {
						if t := time.Since(*s); t >= c.outageTo {
							first.CompareAndSwap(0, int64(t))
						}
					}
				}
				return err, cause
			}, nil
		}, func(name string) {
			now := time.Now()
			runStart[name].Store(&now)
		})
	if err != nil {
		return nil, err
	}
	rep.outage = oresults
	fmt.Fprintf(w, "%-22s %6s %9s %10s %11s %9s  %s\n", "client", "sent", "ok", "failed", "dep. calls", "per req.", "first success after recovery")
	reqs := int(float64(c.rate) * (c.outageTo - c.outageFrom).Seconds())
	for i, r := range oresults {
		name := onames[i]
		calls := odeps[i].inPhase.Load()
		after, recovered := "none", time.Duration(-1)
		if f := firstOK[name].Load(); f != 0 {
			recovered = time.Duration(f) - c.outageTo
			after = recovered.Round(time.Millisecond).String()
		}
		rep.outageCalls = append(rep.outageCalls, calls)
		rep.firstOK = append(rep.firstOK, recovered)
		label := map[string]string{"naive": "naive retries (3)", "resilient": "generated client", "throttled": "generated + throttler"}[name]
		fmt.Fprintf(w, "%-22s %6d %9d %10d %11d %9.2f  %s\n", label, r.sent, r.counts[outOK], r.sent-r.counts[outOK]-r.counts[outWaiting],
			calls, float64(calls)/float64(reqs), after)
		r.name = label
	}
	fmt.Fprintf(w, "(dep. calls: calls that reached the dependency during the outage; per req.: per request that arrived during it; the throttler: K %v over %s, at most %.0f %% refused, no breaker)\n", throttle.K, throttle.Window, 100*throttle.MaxRefusal)
	if len(oresults) == 3 && oresults[0].counts[outOK] > 0 {
		fmt.Fprintf(w, "the throttled client answered %.1f %% as many requests as the naive one, with %.0f %% of its calls to the dependency during the outage\n",
			100*float64(oresults[2].counts[outOK])/float64(oresults[0].counts[outOK]), 100*float64(rep.outageCalls[2])/float64(max(1, rep.outageCalls[0])))
	}
	chart = filepath.Join(c.out, "cascade-outage.svg")
	if err := writeChart(chart, "Outage: outcomes per second by arrival time", oresults, c.outageFrom); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\nchart: %s\n", chart)
	return rep, c.runShed(w, rep)
}

// runScenarios runs each named scenario against its own dependency, at the
// same time unless -parallel=false. onStart, if given, is told when each
// scenario's clock starts.
func runScenarios(c config, names []string, phase func(time.Duration) server.Behaviour, from, to time.Duration,
	build func(name string, cc grpc.ClientConnInterface) (call, error), onStart ...func(string)) ([]*result, []*dependency, error) {
	results := make([]*result, len(names))
	deps := make([]*dependency, len(names))
	calls := make([]call, len(names))
	for i, name := range names {
		d, err := startDependency(phase, from, to)
		if err != nil {
			return nil, nil, err
		}
		//nolint:gocritic // each dependency lives until every scenario ended
		defer d.close()
		deps[i] = d
		if calls[i], err = build(name, d.cc); err != nil {
			return nil, nil, err
		}
	}
	one := func(i int) {
		deps[i].markStart()
		for _, f := range onStart {
			f(names[i])
		}
		results[i] = run(names[i], c.load, calls[i])
	}
	c.each(len(names), one)
	return results, deps, nil
}

// each runs f for 0..n-1: at the same time with -parallel, else one after
// another.
func (c config) each(n int, f func(i int)) {
	if !c.parallel {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

func printSlowTable(w io.Writer, results []*result, deps []*dependency, c config) {
	fmt.Fprintf(w, "%-42s %5s %5s %8s %7s %8s %8s %7s %8s %8s %10s\n",
		"scenario", "sent", "ok", "fallback", "timeout", "circuit", "bulkhead", "waiting", "p50", "p99", "dep. calls")
	for i, r := range results {
		fmt.Fprintf(w, "%-42s %5d %5d %8d %7d %8d %8d %7d %8s %8s %10d\n",
			scenarioTitles[r.name], r.sent, r.counts[outOK], r.counts[outFallback],
			r.counts[outTimeout], r.counts[outCircuitOpen], r.counts[outBulkheadFull], r.counts[outWaiting],
			short(r.percentile(0.50)), short(r.percentile(0.99)), deps[i].inPhase.Load())
		if other := r.counts[outUnavailable] + r.counts[outOther]; other > 0 {
			fmt.Fprintf(w, "%42s %d other errors\n", "", other)
		}
		if r.counts[outFallback] > 0 {
			fmt.Fprintf(w, "%42s fallback answered after: %d circuit open, %d bulkhead full, %d adaptive limit, %d timeout, %d other\n", "",
				r.causes[outCircuitOpen], r.causes[outBulkheadFull], r.causes[outLimited], r.causes[outTimeout],
				r.causes[outUnavailable]+r.causes[outOther])
		}
		r.name = scenarioTitles[r.name]
	}
	fmt.Fprintf(w, "(p50/p99 over completed requests, queueing included; dep. calls: calls that reached the dependency from t=%s; waiting: queued or in flight when arrivals stopped, cut, not drained)\n", c.slowAt)
}

// short rounds a latency for the table: to the millisecond, or to the
// microsecond below one.
func short(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
