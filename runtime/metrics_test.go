package runtime_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
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

const inventoryService = "example.inventory.v1.InventoryService"

// metricValue returns the value of the series of family name whose labels
// include the given name/value pairs: a counter's or gauge's value, a
// histogram's count. It fails the test when no series matches.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func wantMetric(t *testing.T, g prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	if got := metricValue(t, g, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// events records what an Observer receives.
type events struct {
	mu  sync.Mutex
	got []runtime.Event
}

func (e *events) Observe(ev runtime.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.got {
		s := ev.Kind.String() + " " + ev.Cause
		if ev.Kind == runtime.EventBreakerTransition {
			s = ev.Kind.String() + " " + ev.From.String() + "→" + ev.To.String()
		}
		out = append(out, s)
	}
	return out
}

// outageScript runs the scripted failures shared by the metrics and log
// tests: an outage that exhausts the retry budget and opens the breaker,
// fallbacks throughout, then a recovery, then a second failure.
func outageScript(t *testing.T, opts ...runtime.Option) {
	t.Helper()
	srv, cc := start(t, server.Fail(codes.Unavailable))
	clock := newFakeClock()
	retry := &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Microsecond, MaxBackoff: time.Microsecond,
		Multiplier: 1, RetryableCodes: policy.CodesOf(codes.Unavailable)}
	rt := inventory(t, policy.Service{
		Budget:  &policy.Budget{Ratio: 0.1, MinRetries: 1, Window: time.Minute},
		Breaker: breakerPolicy(4, 1),
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Retry: retry}},
	}, append(opts, runtime.WithClock(clock))...)
	plain := inventoryv1.NewInventoryServiceClient(cc)
	fallback := func(_ context.Context, req *inventoryv1.GetStockRequest, _ error) (*inventoryv1.GetStockResponse, error) {
		return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
	}
	get := func() {
		t.Helper()
		if _, err := runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, fallback); err != nil {
			t.Fatal(err)
		}
	}
	// 1: fails, one retry (the budget's floor), fails, the next retry is
	// refused by the budget. 2, 3: fail, retry refused; the 4th failure
	// opens the breaker. 4, 5: refused by the open breaker.
	for range 5 {
		get()
	}
	if s, _ := rt.BreakerState(getStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v after the outage, want open", s)
	}
	// Recovery: after the cool-down the probe succeeds and closes it.
	clock.Advance(11 * time.Second)
	srv.SetBehaviour(server.Healthy)
	get()
	if s, _ := rt.BreakerState(getStock); s != runtime.StateClosed {
		t.Fatalf("breaker %v after recovery, want closed", s)
	}
	// A new failure: a new episode of fallbacks, but the budget has not
	// allowed a retry since it was spent: the same episode of exhaustion.
	srv.SetBehaviour(server.Fail(codes.Unavailable))
	get()
}

func TestMetricsAfterScriptedFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	outageScript(t, runtime.WithRegisterer(reg))
	dep, m := []string{"dependency", inventoryService}, []string{"method", "GetStock"}
	with := func(l ...string) []string { return append(append(append([]string{}, dep...), m...), l...) }

	// Attempts that reached the server: 2 + 1 + 1 (outage), 1 (probe), 1.
	wantMetric(t, reg, 5, "resilient_client_attempts_total", with("code", "UNAVAILABLE")...)
	wantMetric(t, reg, 1, "resilient_client_attempts_total", with("code", "OK")...)
	wantMetric(t, reg, 6, "resilient_client_attempt_duration_seconds", with()...)
	wantMetric(t, reg, 1, "resilient_client_retries_total", with("outcome", "made")...)
	wantMetric(t, reg, 4, "resilient_client_retries_total", with("outcome", "budget")...)
	wantMetric(t, reg, 0, "resilient_client_retries_total", with("outcome", "breaker")...)
	wantMetric(t, reg, 0, "resilient_client_retries_total", with("outcome", "deadline")...)
	wantMetric(t, reg, 2, "resilient_client_breaker_rejections_total", with()...)
	wantMetric(t, reg, 0, "resilient_client_breaker_state", "dependency", inventoryService, "breaker", "shared")
	for state, n := range map[string]float64{"open": 1, "half-open": 1, "closed": 1} {
		wantMetric(t, reg, n, "resilient_client_breaker_transitions_total", "dependency", inventoryService, "breaker", "shared", "state", state)
	}
	wantMetric(t, reg, 4, "resilient_client_fallbacks_total", with("cause", "budget_exhausted")...)
	wantMetric(t, reg, 2, "resilient_client_fallbacks_total", with("cause", "circuit_open")...)

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestTransitionsBudgetAndFallbacksReportedOncePerEpisode(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	obs := &events{}
	outageScript(t, runtime.WithLogger(logger), runtime.WithObserver(obs.Observe))

	want := []string{
		"budget exhausted unavailable",
		"fallback budget_exhausted",
		"breaker transition closed→open",
		"fallback circuit_open",
		"breaker transition open→half-open",
		"breaker transition half-open→closed",
		"fallback budget_exhausted",
	}
	if got := obs.list(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for msg, n := range map[string]int{
		`msg="circuit breaker open"`:               1,
		`msg="circuit breaker half-open"`:          1,
		`msg="circuit breaker closed"`:             1,
		`msg="retry budget exhausted`:              1,
		`msg="fallback answering instead`:          3,
		`cause=circuit_open`:                       1,
		`from=closed to=open cause="failure ratio`: 1,
	} {
		if got := strings.Count(out, msg); got != n {
			t.Errorf("%d log lines with %s, want %d; logs:\n%s", got, msg, n, out)
		}
	}
	if !strings.Contains(out, "level=WARN msg=\"circuit breaker open\" dependency="+inventoryService+" breaker=shared") {
		t.Errorf("the open transition is not a structured warning naming the dependency; logs:\n%s", out)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestBulkheadMetrics(t *testing.T) {
	_, cc := start(t, server.Hang)
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{
		Bulkhead: &policy.Bulkhead{Permits: 1},
		Methods:  []policy.Method{{Name: getStock, Idempotent: true, Timeout: 200 * time.Millisecond}},
	}, runtime.WithRegisterer(reg))
	inUse := func() float64 {
		return metricValue(t, reg, "resilient_client_bulkhead_in_use", "dependency", inventoryService, "bulkhead", "shared")
	}
	if got := inUse(); got != 0 {
		t.Errorf("in use %v before any call", got)
	}
	done := make(chan error)
	go func() {
		_, err := callGetStock(context.Background(), rt, cc)
		done <- err
	}()
	eventually(t, "the first call holds the permit", func() bool { return inUse() == 1 })
	if _, err := callGetStock(context.Background(), rt, cc); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call: %v, want RESOURCE_EXHAUSTED", err)
	}
	<-done
	wantMetric(t, reg, 1, "resilient_client_bulkhead_rejections_total", "dependency", inventoryService, "method", "GetStock")
	wantMetric(t, reg, 1, "resilient_client_attempts_total", "method", "GetStock", "code", "DEADLINE_EXCEEDED")
	if got := inUse(); got != 0 {
		t.Errorf("in use %v after the calls ended", got)
	}
}

func TestStreamMetrics(t *testing.T) {
	_, cc := start(t, server.Healthy)
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{
		Methods: []policy.Method{{Name: watchStock, Kind: policy.KindServerStreaming,
			Bulkhead: &policy.Bulkhead{Permits: 2}}},
	}, runtime.WithRegisterer(reg))
	client := inventoryv1.NewInventoryServiceClient(rt.Conn(cc))
	ctx, cancel := context.WithCancel(context.Background())
	st, err := client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	wantMetric(t, reg, 1, "resilient_client_bulkhead_in_use", "bulkhead", "WatchStock")
	cancel()
	eventually(t, "the permit is returned", func() bool {
		return metricValue(t, reg, "resilient_client_bulkhead_in_use", "bulkhead", "WatchStock") == 0
	})
	wantMetric(t, reg, 1, "resilient_client_attempts_total", "method", "WatchStock", "code", "OK")
}

func TestSeveralClientsShareOneRegisterer(t *testing.T) {
	_, cc := start(t, server.Healthy)
	reg := prometheus.NewRegistry()
	a := inventory(t, policy.Service{}, runtime.WithRegisterer(reg))
	b := inventory(t, policy.Service{}, runtime.WithRegisterer(reg))
	for _, rt := range []*runtime.Client{a, b, b} {
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatal(err)
		}
	}
	wantMetric(t, reg, 3, "resilient_client_attempts_total", "method", "GetStock", "code", "OK")
}

func TestRegistererConflictIsAClearError(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "resilient_client_attempts_total", Help: "x"}, []string{"other"}))
	_, err := runtime.NewClient(&policy.Service{Name: inventoryService}, runtime.WithRegisterer(reg))
	if err == nil || !strings.Contains(err.Error(), "WithRegisterer") {
		t.Fatalf("err = %v, want a WithRegisterer error", err)
	}
}

func TestNoRegistererRegistersNothing(t *testing.T) {
	_, cc := start(t, server.Fail(codes.Unavailable))
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(1, 1)})
	callGetStock(context.Background(), rt, cc) //nolint:errcheck // the call fails on purpose
	reg := prometheus.NewRegistry()
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("%d series, %v", n, err)
	}
}

// noopCall is a unary call that does nothing: the benchmarks measure the
// runtime alone.
func noopCall(context.Context, *inventoryv1.GetStockRequest, ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
	return &inventoryv1.GetStockResponse{}, nil
}

// BenchmarkUnaryNoop measures the cost of the runtime's layers around a
// call that does nothing, without and with metrics.
func BenchmarkUnaryNoop(b *testing.B) {
	policy := policy.Service{
		Name:     inventoryService,
		Budget:   &policy.DefaultBudget,
		Breaker:  breakerPolicy(20, 3),
		Bulkhead: &policy.Bulkhead{Permits: 1 << 20},
		Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: time.Second,
			Retry: retryPolicy(3)}},
	}
	for _, bc := range []struct {
		name string
		opts []runtime.Option
	}{
		{"registerer=none", nil},
		{"registerer=set", []runtime.Option{runtime.WithRegisterer(prometheus.NewRegistry())}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt, err := runtime.NewClient(&policy, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			m := rt.Method(0)
			req := &inventoryv1.GetStockRequest{Sku: "a"}
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := runtime.Unary(ctx, m, "", req, nil, noopCall, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
