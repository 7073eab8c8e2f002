package runtime_test

// Attacks on the README's Observability section: after a known sequence
// of calls against a real server on loopback, every series of the
// exposition (atk22eSeries: every counter and gauge not at zero) and every
// event and log line is read back with its exact value.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack25aLog is a text logger into a buffer safe for concurrent use.
type attack25aLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *attack25aLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&lockedWriter{w: &l.buf, mu: &l.mu}, nil))
}

// lines returns the log's lines without their time attribute.
func (l *attack25aLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "time=") {
			line = line[strings.IndexByte(line, ' ')+1:]
		}
		out = append(out, line)
	}
	return out
}

func attack25aWantLines(t *testing.T, l *attack25aLog, want []string) {
	t.Helper()
	if got := l.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// attack25aEvents renders events as "kind method from→to cause".
func attack25aEvents(evs []runtime.Event) []string {
	var out []string
	for _, e := range evs {
		s := e.Kind.String() + " " + e.Method
		if e.Kind == runtime.EventBreakerTransition {
			s += " " + e.From.String() + "→" + e.To.String()
		}
		if e.Dependency != inventoryService {
			s += " dependency=" + e.Dependency
		}
		out = append(out, s+" "+e.Cause)
	}
	return out
}

func attack25aWantEvents(t *testing.T, rec *atk22eEvents, want []string) {
	t.Helper()
	if got := attack25aEvents(rec.all()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const attack25aDep = "dependency=" + inventoryService

// A method with a breaker of its own: its gauge and transitions are
// labelled breaker=<the method's name>, the service's shared breaker (which
// another method goes through) stays untouched, its events carry the full
// method name and its log lines method=GetStock, never breaker=shared.
// The fallback is counted per call by cause and reported once per cause
// until the method succeeds, then again.
func TestAttack25aMethodBreakerSeriesAndLogsNameTheMethod(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	var log attack25aLog
	rec := &atk22eEvents{}
	rt := inventory(t, policy.Service{
		Breaker: breakerPolicy(4, 1),
		Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Breaker: breakerPolicy(4, 1)},
			{Name: reserveStock, Idempotent: true},
		},
	}, runtime.WithClock(clock), runtime.WithRegisterer(reg), runtime.WithLogger(log.logger()), runtime.WithObserver(rec.observe))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	var answered atomic.Int32
	fb := func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
		answered.Add(1)
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	}
	get := func() {
		t.Helper()
		if _, err := runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, fb); err != nil {
			t.Fatalf("GetStock: %v", err)
		}
	}
	reserve := func() error {
		_, err := runtime.Unary(context.Background(), rt.Method(1), "", &inventoryv1.ReserveStockRequest{OrderId: "o"}, nil, plain.ReserveStock, nil)
		return err
	}
	for range 4 { // the 4th failure opens GetStock's own breaker
		get()
	}
	for range 2 { // refused
		get()
	}
	if err := reserve(); status.Code(err) != codes.Unavailable {
		t.Fatalf("ReserveStock: %v, want UNAVAILABLE from the server (the shared breaker is closed)", err)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}":       4,
		"resilient_client_attempts_total{code=UNAVAILABLE,method=ReserveStock}":   1,
		"resilient_client_breaker_state{breaker=GetStock}":                        2,
		"resilient_client_breaker_transitions_total{breaker=GetStock,state=open}": 1,
		"resilient_client_breaker_rejections_total{method=GetStock}":              2,
		"resilient_client_fallbacks_total{cause=unavailable,method=GetStock}":     4,
		"resilient_client_fallbacks_total{cause=circuit_open,method=GetStock}":    2,
	}, "4 failures and 2 refusals of GetStock, 1 failure of ReserveStock")

	clock.Advance(11 * time.Second)
	srv.SetBehaviour(server.Healthy)
	get() // the probe closes the breaker
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	get() // a new episode of fallbacks
	if n := answered.Load(); n != 7 {
		t.Errorf("the fallback answered %d calls, want 7", n)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}":            5,
		"resilient_client_attempts_total{code=OK,method=GetStock}":                     1,
		"resilient_client_attempts_total{code=UNAVAILABLE,method=ReserveStock}":        1,
		"resilient_client_breaker_transitions_total{breaker=GetStock,state=open}":      1,
		"resilient_client_breaker_transitions_total{breaker=GetStock,state=half-open}": 1,
		"resilient_client_breaker_transitions_total{breaker=GetStock,state=closed}":    1,
		"resilient_client_breaker_rejections_total{method=GetStock}":                   2,
		"resilient_client_fallbacks_total{cause=unavailable,method=GetStock}":          5,
		"resilient_client_fallbacks_total{cause=circuit_open,method=GetStock}":         2,
	}, "the recovery and a new failure")
	if srv.Calls(getStock) != 6 || srv.Calls(reserveStock) != 1 {
		t.Errorf("the server saw %d GetStock and %d ReserveStock, want 6 and 1", srv.Calls(getStock), srv.Calls(reserveStock))
	}
	attack25aWantEvents(t, rec, []string{
		"fallback " + getStock + " unavailable",
		"breaker transition " + getStock + " closed→open failure ratio reached over the window",
		"fallback " + getStock + " circuit_open",
		"breaker transition " + getStock + " open→half-open cool-down elapsed",
		"breaker transition " + getStock + " half-open→closed every half-open probe succeeded",
		"fallback " + getStock + " unavailable",
	})
	lines := log.lines()
	want := []string{
		`level=WARN msg="fallback answering instead of the dependency" ` + attack25aDep + ` method=GetStock cause=unavailable error=`,
		`level=WARN msg="circuit breaker open" ` + attack25aDep + ` method=GetStock from=closed to=open cause="failure ratio reached over the window"`,
		`level=WARN msg="fallback answering instead of the dependency" ` + attack25aDep + ` method=GetStock cause=circuit_open error=`,
		`level=INFO msg="circuit breaker half-open" ` + attack25aDep + ` method=GetStock from=open to=half-open cause="cool-down elapsed"`,
		`level=INFO msg="circuit breaker closed" ` + attack25aDep + ` method=GetStock from=half-open to=closed cause="every half-open probe succeeded"`,
		`level=WARN msg="fallback answering instead of the dependency" ` + attack25aDep + ` method=GetStock cause=unavailable error=`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) || strings.Contains(lines[i], "breaker=") {
			t.Errorf("log line %d:\n%s\nwant it to begin\n%s\nwith no breaker=", i, lines[i], want[i])
		}
	}
}

// The retry budget is the client's, shared by its methods: an episode of
// exhaustion that two methods' refusals make is one warning, at the
// first refusal, and one "available again", which says how many retries
// the episode refused: as many as retries_total{outcome="budget"} counts
// over both methods. It comes at the first call of a method that retries
// after a whole window, not at a call of a method that does not.
func TestAttack25aBudgetEpisodeCountsWhatTheMetricCounts(t *testing.T) {
	srv, cc := start(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	var log attack25aLog
	rec := &atk22eEvents{}
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Microsecond, MaxBackoff: time.Microsecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	rt := inventory(t, policy.Service{
		Budget: &policy.Budget{Ratio: 0.1, MinRetries: 2, Window: 10 * time.Second},
		Methods: []policy.Method{
			{Name: getStock, Idempotent: true, Retry: retry},
			{Name: reserveStock, Idempotent: true, Retry: retry},
			{Name: inventoryv1.InventoryService_StockReport_FullMethodName, Idempotent: true},
		},
	}, runtime.WithClock(clock), runtime.WithRegisterer(reg), runtime.WithLogger(log.logger()), runtime.WithObserver(rec.observe))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	get := func() error {
		_, err := runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		return err
	}
	reserve := func() error {
		_, err := runtime.Unary(context.Background(), rt.Method(1), "", &inventoryv1.ReserveStockRequest{OrderId: "o"}, nil, plain.ReserveStock, nil)
		return err
	}
	report := func() error {
		_, err := runtime.Unary(context.Background(), rt.Method(2), "", &inventoryv1.StockReportRequest{}, nil, plain.StockReport, nil)
		return err
	}
	// Call 1 (GetStock) spends the floor of 2 retries; calls 2..6, in turn
	// ReserveStock and GetStock, 100 ms apart, each have their one retry
	// refused (6 requests × 0.1 rounds down to 0).
	for i := range 6 {
		call := get
		if i%2 == 1 {
			call = reserve
		}
		if err := call(); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i+1, err)
		}
		clock.Advance(100 * time.Millisecond)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}":     5,
		"resilient_client_attempts_total{code=UNAVAILABLE,method=ReserveStock}": 3,
		"resilient_client_retries_total{method=GetStock,outcome=made}":          2,
		"resilient_client_retries_total{method=GetStock,outcome=budget}":        2,
		"resilient_client_retries_total{method=ReserveStock,outcome=budget}":    3,
	}, "the outage")
	if n := srv.Calls(getStock) + srv.Calls(reserveStock); n != 8 {
		t.Errorf("the server saw %d attempts, want 8", n)
	}

	srv.SetBehaviour(server.Healthy)
	clock.Advance(10 * time.Second) // a whole window since the last refusal (at 500 ms)
	for _, call := range []func() error{report, get, reserve, get} {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	attack25aWantEvents(t, rec, []string{
		"budget exhausted " + reserveStock + " unavailable",
		"budget recovered " + getStock + " no retry refused for 10s; 5 refused over 400ms",
	})
	attack25aWantLines(t, &log, []string{
		`level=WARN msg="retry budget exhausted: retries refused until the window holds fewer" ` + attack25aDep +
			` method=ReserveStock cause=unavailable error="resilient: retry budget towards ` + inventoryService +
			` exhausted (` + reserveStock + `); last error: rpc error: code = Unavailable desc = injected Unavailable"`,
		`level=INFO msg="retry budget available again" ` + attack25aDep + ` method=GetStock cause="no retry refused for 10s; 5 refused over 400ms"`,
	})
}

// A caller whose context is over before the call counts nowhere, on any
// path: the generated client's unary call with its cache, rate limit,
// bulkhead, breaker and fallback; with grpc.OnFinish; a keyed call; a
// stream. No series moves from zero, no event is reported, nothing is
// logged.
func TestAttack25aContextOverBeforeTheCallCountsNothing(t *testing.T) {
	fs, cc := startFault(t, server.Healthy)
	reg := prometheus.NewRegistry()
	var log attack25aLog
	rec := &atk22eEvents{}
	var answered atomic.Int32
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithLogger(log.logger()), runtime.WithObserver(rec.observe)},
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			answered.Add(1)
			return &inventoryv1.GetStockResponse{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, ctx := range []context.Context{canceled, expired} {
		for range 25 { // more than the breaker's minimum of calls
			_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"}, grpc.OnFinish(func(error) {}))
			_, _ = c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o1"})
			_, _ = c.StockReport(ctx, &inventoryv1.StockReportRequest{})
			if st, err := c.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "apple"}); err == nil {
				_, _ = st.Recv()
			}
		}
	}
	if n := fs.Calls(getStock) + fs.Calls(reserveStock) + fs.Calls(watchStock); n != 0 {
		t.Errorf("the server saw %d calls", n)
	}
	if n := answered.Load(); n != 0 {
		t.Errorf("the fallback answered %d dead callers", n)
	}
	atk22eWantSeries(t, reg, map[string]float64{}, "calls on contexts over before they began")
	if h := atk24eDurations(t, reg, "GetStock") + atk24eDurations(t, reg, "WatchStock"); h != 0 {
		t.Errorf("%d attempt durations observed", h)
	}
	attack25aWantEvents(t, rec, nil)
	attack25aWantLines(t, &log, nil)
}

// Refusals by the client's own layers are counted once each, in their
// own counter and in fallbacks_total under their cause, and reach no
// attempt: a rate limit of two tokens (0.1 a second), then three calls
// refused; a bulkhead of one permit held by a call the server holds, two
// calls refused past max_wait, the gauge at 1 while it is held and 0
// after. Each cause is one fallback event, however many calls it answers.
func TestAttack25aClientRefusalsCountOnceByCause(t *testing.T) {
	release := make(chan struct{})
	var holding atomic.Bool
	fs, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		if holding.Load() {
			return atkHold(release)(ctx, c)
		}
		return nil
	})
	readyConn(t, cc)
	client := func(edit func(m *policy.Method)) (*inventoryv1.InventoryServiceResilientClient, *prometheus.Registry, *atk22eEvents, *atomic.Int32) {
		reg := prometheus.NewRegistry()
		rec := &atk22eEvents{}
		answered := new(atomic.Int32)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
			Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithObserver(rec.observe)},
			GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
				answered.Add(1)
				return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
			},
		}, func(p *policy.Service) {
			p.Bulkhead = nil
			m := atkMethod(p, getStock)
			m.Retry = nil
			m.Timeout = 10 * time.Second
			edit(m)
		})
		return c, reg, rec, answered
	}
	get := func(c *inventoryv1.InventoryServiceResilientClient) {
		t.Helper()
		if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("rate limit", func(t *testing.T) {
		c, reg, rec, answered := client(func(m *policy.Method) {
			m.RateLimit = &policy.RateLimit{RequestsPerSecond: 0.1, Burst: 2, MaxWait: 5 * time.Millisecond}
		})
		for range 5 { // two tokens, then three refusals
			get(c)
		}
		atk22eWantSeries(t, reg, map[string]float64{
			"resilient_client_attempts_total{code=OK,method=GetStock}":             2,
			"resilient_client_rate_limited_total{method=GetStock}":                 3,
			"resilient_client_fallbacks_total{cause=rate_limited,method=GetStock}": 3,
		}, "two calls and three refused by the rate limit")
		if n := answered.Load(); n != 3 {
			t.Errorf("the fallback answered %d calls, want 3", n)
		}
		attack25aWantEvents(t, rec, []string{"fallback " + getStock + " rate_limited"})
	})

	t.Run("bulkhead", func(t *testing.T) {
		c, reg, rec, answered := client(func(m *policy.Method) {
			m.Bulkhead = &policy.Bulkhead{Permits: 1, MaxWait: 20 * time.Millisecond}
		})
		before := fs.Calls(getStock)
		holding.Store(true)
		done := make(chan struct{})
		go func() { // holds the permit
			defer close(done)
			get(c)
		}()
		atkWaitFor(t, "a call holds the permit", func() bool { return fs.InFlight() == 1 })
		for range 2 {
			get(c)
		}
		atk22eWantSeries(t, reg, map[string]float64{
			"resilient_client_bulkhead_in_use{bulkhead=GetStock}":                   1,
			"resilient_client_bulkhead_rejections_total{method=GetStock}":           2,
			"resilient_client_fallbacks_total{cause=bulkhead_full,method=GetStock}": 2,
		}, "two calls refused by the bulkhead")
		close(release)
		<-done
		holding.Store(false)
		atk22eWantSeries(t, reg, map[string]float64{
			"resilient_client_attempts_total{code=OK,method=GetStock}":              1,
			"resilient_client_bulkhead_rejections_total{method=GetStock}":           2,
			"resilient_client_fallbacks_total{cause=bulkhead_full,method=GetStock}": 2,
		}, "the held call's end")
		if n, calls := answered.Load(), fs.Calls(getStock)-before; n != 2 || calls != 1 {
			t.Errorf("the fallback answered %d calls, the server saw %d; want 2 and 1", n, calls)
		}
		attack25aWantEvents(t, rec, []string{"fallback " + getStock + " bulkhead_full"})
	})
}

// A hedged call's copies are attempts, each counted once by how it ended:
// a first copy the server holds loses to the second, which answers; the
// loser, cut by the client, is counted under CANCELLED and tells the
// breaker nothing; one hedged copy sent. Then a first copy that fails
// with a non-fatal code is followed at once by the next: one UNAVAILABLE,
// one OK, one more copy sent; the breaker has seen one failure in two
// calls (0.5 of them, under its minimum of 4), and stays closed.
func TestAttack25aHedgedCopiesCountedOnceEach(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, cc := startFault(t, func(ctx context.Context, c server.Call) error {
		switch c.N {
		case 1:
			return atkHold(release)(ctx, c)
		case 3:
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	})
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	rec := &atk22eEvents{}
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithObserver(rec.observe)},
	}, func(p *policy.Service) {
		m := attack23mHedged(p)
		m.Hedging = &policy.Hedging{Delay: 50 * time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		p.Breaker = breakerPolicy(4, 1)
	})
	for i := range 2 {
		if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	atkWaitFor(t, "the server saw the loser cancelled", func() bool { return srv.Cancelled(getStock) == 1 })
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=OK,method=GetStock}":          2,
		"resilient_client_attempts_total{code=CANCELLED,method=GetStock}":   1,
		"resilient_client_attempts_total{code=UNAVAILABLE,method=GetStock}": 1,
		"resilient_client_retries_total{method=GetStock,outcome=hedge}":     2,
	}, "two hedged calls of two copies each")
	if n := atk24eDurations(t, reg, "GetStock"); n != 4 {
		t.Errorf("%d attempt durations, want 4", n)
	}
	if n := srv.Calls(getStock); n != 4 {
		t.Errorf("the server saw %d copies, want 4", n)
	}
	attack25aWantEvents(t, rec, nil)
}

// Every family a client can register, each with series, passes
// testutil.GatherAndLint, as the README says the names do (the scripted
// outage's test lints only the families its policy registers).
func TestAttack25aEveryFamilyPassesTheLint(t *testing.T) {
	_, cc := startFault(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithPolicy(func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{}
			p.ClientThrottle = &policy.Throttle{}
		})},
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			return &inventoryv1.GetStockResponse{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _ = c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"})
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n == 0 {
		t.Fatalf("%d series, %v", n, err)
	}
	names := map[string]bool{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	if len(names) != 15 {
		t.Errorf("%d families with series, want the README's 15: %v", len(names), names)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// Sixty callers at once into a dependency that is down: whatever the
// interleaving, the counters agree with each other and with the server,
// and each event comes once. Every attempt the server saw is one
// attempts_total{UNAVAILABLE}; every call is a first attempt sent or
// refused by the breaker, so attempts − retries{made} + rejections −
// retries{breaker} = 60; every call is answered by the fallback, under
// circuit_open as often as the breaker refused, budget_exhausted as
// often as the budget did. The breaker opens once (one transition, one
// event, the gauge at 2); the budget's exhaustion is one event; each
// cause of fallback one event.
func TestAttack25aConcurrentOutageCountsAgreeAndEventsComeOnce(t *testing.T) {
	const callers = 60
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	rec := &atk22eEvents{}
	var answered atomic.Int32
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithObserver(rec.observe), runtime.WithClock(newAtkClock())},
		GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
			answered.Add(1)
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		},
	}, func(p *policy.Service) {
		p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.Breaker = breakerPolicy(4, 1)
		p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 5, Window: time.Minute}
		m := atkMethod(p, getStock)
		m.Timeout = 5 * time.Second
		m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
			Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	})
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			<-start
			if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
				t.Errorf("GetStock: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	s := atk22eSeries(t, reg)
	v := func(k string) float64 { return s["resilient_client_"+k] }
	attempts := v("attempts_total{code=UNAVAILABLE,method=GetStock}")
	made, byBudget, byBreaker := v("retries_total{method=GetStock,outcome=made}"), v("retries_total{method=GetStock,outcome=budget}"),
		v("retries_total{method=GetStock,outcome=breaker}")
	rejections := v("breaker_rejections_total{method=GetStock}")
	fbOpen, fbBudget, fbDown := v("fallbacks_total{cause=circuit_open,method=GetStock}"), v("fallbacks_total{cause=budget_exhausted,method=GetStock}"),
		v("fallbacks_total{cause=unavailable,method=GetStock}")
	t.Logf("attempts %v, retries made %v, budget %v, breaker %v; rejections %v; fallbacks open %v, budget %v, unavailable %v",
		attempts, made, byBudget, byBreaker, rejections, fbOpen, fbBudget, fbDown)
	if n := float64(fs.Calls(getStock)); attempts != n {
		t.Errorf("attempts_total{UNAVAILABLE} %v, the server saw %v", attempts, n)
	}
	if got := attempts - made + rejections - byBreaker; got != callers {
		t.Errorf("first attempts sent or refused: %v, want %d", got, callers)
	}
	if fbOpen != rejections || fbBudget != byBudget || fbOpen+fbBudget+fbDown != callers || answered.Load() != callers {
		t.Errorf("fallbacks: %v circuit_open (rejections %v), %v budget_exhausted (refused %v), %v unavailable, %d answered; want them to add to %d",
			fbOpen, rejections, fbBudget, byBudget, fbDown, answered.Load(), callers)
	}
	if made > 5 {
		t.Errorf("%v retries made, over the budget's floor of 5", made)
	}
	if v("breaker_state{breaker=shared}") != 2 || v("breaker_transitions_total{breaker=shared,state=open}") != 1 ||
		len(s) != len(filterNonZero(map[string]float64{
			"attempts": attempts, "made": made, "budget": byBudget, "breaker": byBreaker, "rej": rejections,
			"fo": fbOpen, "fb": fbBudget, "fd": fbDown, "state": 2, "open": 1,
		})) {
		t.Errorf("series: %v", s)
	}
	counts := map[string]int{}
	for _, e := range attack25aEvents(rec.all()) {
		counts[e]++
	}
	want := map[string]int{
		"breaker transition  closed→open failure ratio reached over the window": 1, // the shared breaker: no method
	}
	if byBudget > 0 {
		want["budget exhausted "+getStock+" unavailable"] = 1
	}
	for cause, n := range map[string]float64{"circuit_open": fbOpen, "budget_exhausted": fbBudget, "unavailable": fbDown} {
		if n > 0 {
			want["fallback "+getStock+" "+cause] = 1
		}
	}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", counts, want)
	}
}

// filterNonZero returns m without its zero values.
func filterNonZero(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// The observer is called outside every lock of the runtime: one that, on
// each event, reads the breaker's state and the bulkhead's permits and
// makes a call of the same method itself (once: its own call's events are
// only recorded) neither deadlocks nor changes what is reported. Events of
// every kind a unary call reports: a fallback, the budget's exhaustion, the
// breaker's transitions, a stale cached answer.
func TestAttack25aObserverMayCallTheClientBack(t *testing.T) {
	fs, cc := startFault(t, server.Healthy)
	readyConn(t, cc)
	clock := newAtkClock()
	var c *inventoryv1.InventoryServiceResilientClient
	var mu sync.Mutex
	var kinds []string
	var inside atomic.Bool
	observe := func(e runtime.Event) {
		mu.Lock()
		kinds = append(kinds, e.Kind.String()+" "+e.Cause)
		mu.Unlock()
		if !inside.CompareAndSwap(false, true) {
			return
		}
		defer inside.Store(false)
		rt := c.Runtime()
		rt.BreakerState(getStock)
		rt.BulkheadInUse(getStock)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "other"})
	}
	var err error
	c, err = inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithObserver(observe), runtime.WithClock(clock), runtime.WithPolicy(func(p *policy.Service) {
			p.RateLimit, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
			p.Breaker = breakerPolicy(4, 1)
			p.Budget = &policy.Budget{Ratio: 0.01, MinRetries: 1, Window: time.Minute}
			m := atkMethod(p, getStock)
			m.Timeout = 2 * time.Second
			m.Retry = &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
				Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
		})},
		GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(sku string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: sku})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("GetStock did not return in 10 s: an observer that calls the client back deadlocked it")
		}
	}
	get("kept") // an answer kept for "kept"
	clock.Advance(2 * time.Second)
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	for range 4 {
		get("new")
	}
	get("kept")
	clock.Advance(11 * time.Second)
	fs.SetBehaviour(server.Healthy)
	get("new")
	mu.Lock()
	defer mu.Unlock()
	t.Logf("events: %q", kinds)
	for _, want := range []string{"fallback unavailable", "budget exhausted unavailable", "breaker transition failure ratio reached over the window",
		"fallback circuit_open", "fallback stale_cache", "breaker transition cool-down elapsed", "breaker transition every half-open probe succeeded"} {
		found := false
		for _, k := range kinds {
			found = found || k == want
		}
		if !found {
			t.Errorf("no event %q among %q", want, kinds)
		}
	}
}

// A caller who cancels while its attempt is at the server: the attempt is
// counted once, under CANCELLED; no retry is made or refused, no fallback
// answers (the caller wants nothing), no event is reported, and the
// breaker, which counts a cancellation as nothing, moves on none of ten
// such calls (its minimum is 4).
func TestAttack25aCancelledMidAttemptCountsOnceUnderCancelled(t *testing.T) {
	fs, cc := startFault(t, server.Hang)
	readyConn(t, cc)
	c, reg, rec, answered := attack25aWatched(t, cc, func(p *policy.Service) {
		p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.Breaker = breakerPolicy(4, 1)
		m := atkMethod(p, getStock)
		m.Timeout = 10 * time.Second
		m.Retry = &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable, codes.Canceled, codes.DeadlineExceeded)}
	})
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
			done <- err
		}()
		atkWaitFor(t, "the attempt at the server", func() bool { return fs.Calls(getStock) == i+1 })
		cancel()
		if err := <-done; status.Code(err) != codes.Canceled {
			t.Fatalf("call %d: %v, want CANCELLED", i+1, err)
		}
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=CANCELLED,method=GetStock}": 10,
	}, "ten calls cancelled at the server")
	if n := answered.Load(); n != 0 {
		t.Errorf("the fallback answered %d cancelled callers", n)
	}
	atkWantBreaker(t, c.Runtime(), getStock, runtime.StateClosed, "breaker %v after ten cancellations, want closed")
	attack25aWantEvents(t, rec, nil)
}

// A method's own adaptive limit: its gauge is labelled limiter=GetStock
// (no shared series without a shared limit), its refusals are counted
// under the method, answered by the fallback under concurrency_limited,
// and reported once, naming the limit; the attempts it refused reach
// neither the server nor attempts_total.
func TestAttack25aMethodAdaptiveLimitSeriesNameTheMethod(t *testing.T) {
	release := make(chan struct{})
	fs, cc := startFault(t, atkHold(release))
	readyConn(t, cc)
	c, reg, rec, answered := attack25aWatched(t, cc, func(p *policy.Service) {
		p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle, p.Breaker = nil, nil, nil, nil
		m := atkMethod(p, getStock)
		m.Retry = nil
		m.Timeout = 10 * time.Second
		m.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 1, InitialLimit: 2, MaxLimit: 2,
			Tolerance: 1.5, Smoothing: 0.5, BaselineWindow: 30 * time.Second}
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
				t.Errorf("a held call: %v", err)
			}
		})
	}
	atkWaitFor(t, "two calls held", func() bool { return fs.InFlight() == 2 })
	for range 3 {
		if _, err := c.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "apple"}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	wg.Wait()
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=OK,method=GetStock}":                    2,
		"resilient_client_adaptive_limit{limiter=GetStock}":                           2,
		"resilient_client_adaptive_rejections_total{method=GetStock}":                 3,
		"resilient_client_fallbacks_total{cause=concurrency_limited,method=GetStock}": 3,
	}, "two calls held, three refused by the limit")
	if n, calls := answered.Load(), fs.Calls(getStock); n != 3 || calls != 2 {
		t.Errorf("the fallback answered %d, the server saw %d; want 3 and 2", n, calls)
	}
	attack25aWantEvents(t, rec, []string{
		"concurrency limited " + getStock + " limit 2 (GetStock)",
		"fallback " + getStock + " concurrency_limited",
	})
}

// A stream that ends without a message is one attempt, under its code,
// and one duration (to its end); one with messages is one attempt and one
// duration however many it receives.
func TestAttack25aStreamDurationOncePerStream(t *testing.T) {
	fs, cc := startFault(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg)},
	}, func(p *policy.Service) { p.Breaker = nil })
	recvAll := func() error {
		st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
		if err != nil {
			return err
		}
		for {
			if _, err := st.Recv(); err != nil {
				return err
			}
		}
	}
	if err := recvAll(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the failing stream: %v, want UNAVAILABLE", err)
	}
	fs.SetBehaviour(server.Healthy)
	if err := recvAll(); err != io.EOF {
		t.Fatalf("the healthy stream: %v, want io.EOF after its three messages", err)
	}
	atkWaitFor(t, "the permits back", func() bool { n, _ := c.Runtime().BulkheadInUse(watchStock); return n == 0 })
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=WatchStock}": 1,
		"resilient_client_attempts_total{code=OK,method=WatchStock}":          1,
	}, "a failed stream and one of three messages")
	if n := atk24eDurations(t, reg, "WatchStock"); n != 2 {
		t.Errorf("%d stream durations, want 2", n)
	}
}

// attack25aWatched is the generated inventory client on cc with the policy
// edit gives it, a registry and an event recorder of its own, and a
// GetStock fallback that counts its answers (an empty response each).
func attack25aWatched(t *testing.T, cc grpc.ClientConnInterface, edit func(p *policy.Service)) (*inventoryv1.InventoryServiceResilientClient, *prometheus.Registry, *atk22eEvents, *atomic.Int32) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &atk22eEvents{}
	answered := new(atomic.Int32)
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithObserver(rec.observe)},
		GetStockFallback: func(context.Context, *inventoryv1.GetStockRequest, error) (*inventoryv1.GetStockResponse, error) {
			answered.Add(1)
			return &inventoryv1.GetStockResponse{}, nil
		},
	}, edit)
	return c, reg, rec, answered
}
