package example_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// held is a behaviour that holds every call to the methods given until
// release is closed or its caller gives up, and answers the others at
// once.
func held(release <-chan struct{}, methods ...string) server.Behaviour {
	return func(ctx context.Context, c server.Call) error {
		for _, m := range methods {
			if c.Method == m {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return status.FromContextError(ctx.Err()).Err()
				}
			}
		}
		return nil
	}
}

// shedLimits overrides the inventory service's shedding on the server.
func shedLimits(l policy.Limits, code codes.Code, pushback time.Duration) rserver.Option {
	return rserver.WithPolicy(inventoryName, func(p *policy.Server) {
		p.Shedding.Limits, p.Shedding.Code, p.Shedding.Pushback = l, code, pushback
	})
}

// holdReport sends a StockReport with the plain client (no retries), which
// a handler held on release keeps in flight; the returned func closes
// release and waits for the report's end. The test's end cancels it.
func holdReport(t *testing.T, r *rig, release chan struct{}) (end func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		_, err := inventoryv1.NewInventoryServiceClient(r.cc).StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "full"})
		done <- err
	}()
	return func() { close(release); <-done }
}

// The hedge of the hedge-against-shedding tests: a copy every
// shedHedgeDelay. It is long enough that a shed copy's refusal is back at
// the client before the next copy's turn however loaded the machine (a
// 20 ms delay was shorter than a refusal's round trip at load 10, and a
// third copy went out before the second's refusal was read).
const shedHedgeDelay = 400 * time.Millisecond

// newHedgeShedRig is the rig of the hedge-against-shedding tests: GetStock
// hedged (copies after shedHedgeDelay, up to 3, UNAVAILABLE non-fatal, no
// retry or cache, 5 s per copy) against a handler that holds GetStock
// until the Guard has shed `shed` copies and then for `after` more, behind
// a Guard whose normal limit is one and which sheds with code and
// pushback. The first copy thus holds the only place until the later ones
// were refused, at any load (a fixed 150 ms was used up at load 10 before
// the third copy arrived). The connection is warmed.
func newHedgeShedRig(t *testing.T, code codes.Code, pushback time.Duration, shed uint64, after time.Duration) *rig {
	t.Helper()
	hedge := runtime.WithPolicy(func(p *policy.Service) {
		m := &p.Methods[0]
		m.Retry, m.Cache = nil, nil
		m.Hedging = &policy.Hedging{Delay: shedHedgeDelay, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})
	var rp atomic.Pointer[rig]
	hold := func(ctx context.Context, c server.Call) error {
		if c.Method != getStock {
			return nil
		}
		for r := rp.Load(); r == nil || r.stats().Shed[rserver.PriorityNormal] < shed; r = rp.Load() {
			if err := server.Wait(ctx, time.Millisecond); err != nil {
				return err
			}
		}
		return server.Wait(ctx, after)
	}
	r := newRig(t, hold, []rserver.Option{shedLimits(policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 2}, code, pushback)}, longTimeouts, hedge)
	rp.Store(r)
	r.warm(t)
	return r
}

// longTimeouts gives every unary inventory method a 5 s per-attempt
// timeout, so that calls the test holds are not ended by the client.
var longTimeouts = runtime.WithPolicy(func(p *policy.Service) {
	for i := range p.Methods {
		if p.Methods[i].Kind == policy.KindUnary {
			p.Methods[i].Timeout = 5 * time.Second
		}
	}
})

// waitFor polls cond every millisecond for at most 3 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestAttackR18eLowPriorityCannotTakeHighPlaces: across a real
// connection, callers that lower GetStock to low with runtime.WithPriority
// fill the low limit and no further; the rest of them are shed once each
// (RESOURCE_EXHAUSTED is final), a caller cannot raise StockReport above
// its annotated low, and ReserveStock (high) and a normal GetStock still
// get through while the low work holds its places.
func TestAttackR18eLowPriorityCannotTakeHighPlaces(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, held(release, getStock),
		[]rserver.Option{shedLimits(policy.Limits{Low: 2, Normal: 4, High: 6, Critical: 8}, codes.ResourceExhausted, 50*time.Millisecond)},
		longTimeouts)
	low := runtime.WithPriority(context.Background(), policy.PriorityLow)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.client.GetStock(low, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("low-", i)})
			errs <- err
		}()
	}
	waitFor(t, "two low calls held and four shed", func() bool {
		s := r.stats()
		return s.Admitted[rserver.PriorityLow] == 2 && s.Shed[rserver.PriorityLow] == 4 && r.srv.Calls(getStock) == 2
	})
	for range 4 {
		if err := <-errs; status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a low call beyond the low limit: %v, want RESOURCE_EXHAUSTED", err)
		}
	}
	critical := runtime.WithPriority(context.Background(), policy.PriorityCritical)
	if _, err := r.client.StockReport(critical, &inventoryv1.StockReportRequest{Warehouse: "w"}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("StockReport sent as critical while the low limit is full: %v, want it shed as the low it is annotated", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-high", Sku: "a", Units: 1}); err != nil {
		t.Errorf("ReserveStock (high) while low work holds the low places: %v, want it served", err)
	}
	go func() {
		_, err := r.client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "normal"})
		errs <- err
	}()
	waitFor(t, "the normal GetStock admitted", func() bool { return r.stats().Admitted[rserver.PriorityNormal] == 1 })
	close(release)
	wg.Wait()
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("a held call after its release: %v", err)
		}
	}
	if n := r.srv.Calls(getStock); n != 3 {
		t.Errorf("the server ran %d GetStock calls, want the low limit's 2 and the normal one: a shed call was retried", n)
	}
	if s := r.stats(); s.InFlight != 0 || s.Shed[rserver.PriorityLow] != 5 || s.Shed[rserver.PriorityHigh] != 0 {
		t.Errorf("guard stats %+v: want no place held, 5 low refusals, no high one", s)
	}
}

// TestAttackR18eShedPushbackBoundsTheRetries: the service sheds with
// UNAVAILABLE and a 30 ms pushback, which GetStock retries. Three waves of
// eight callers (the bulkhead's permits) against a full service: the
// attempts the server refuses are bounded by the retry budget (10 retries
// plus 10 % of the requests), not the three attempts of every call, and no
// call spends its three attempts in less than two pushbacks.
func TestAttackR18eShedPushbackBoundsTheRetries(t *testing.T) {
	const waves, callers, pushback = 3, 8, 30 * time.Millisecond
	release := make(chan struct{})
	r := newRig(t, held(release, stockReport),
		[]rserver.Option{shedLimits(policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}, codes.Unavailable, pushback)})
	endHold := holdReport(t, r, release)
	waitFor(t, "the service full", func() bool { return r.stats().InFlight == 1 })

	var mu sync.Mutex
	fastest, exhausted := time.Hour, 0
	for w := range waves {
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				_, err := r.client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", w, "-", i)})
				if status.Code(err) != codes.Unavailable {
					t.Errorf("GetStock against a full service: %v, want UNAVAILABLE", err)
				}
				if errors.Is(err, runtime.ErrRetriesExhausted) {
					mu.Lock()
					fastest, exhausted = min(fastest, time.Since(start)), exhausted+1
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	endHold()
	requests := waves * callers
	shed := int(r.stats().Shed[rserver.PriorityNormal])
	budget := 10 + (requests+9)/10
	if shed < callers || shed > requests+budget {
		t.Errorf("the server refused %d attempts of %d calls; want at most %d (one each, plus the retry budget's %d), not up to %d", shed, requests, requests+budget, budget, 3*requests)
	}
	if exhausted > 0 && fastest < 2*pushback {
		t.Errorf("a call made its three attempts in %v, under two pushbacks of %v", fastest, pushback)
	}
	if n := r.srv.Calls(getStock); n != 0 {
		t.Errorf("the handler ran %d GetStock calls while the service was full", n)
	}
	t.Logf("%d calls, %d attempts refused, %d exhausted, fastest %v", requests, shed, exhausted, fastest)
}

// TestAttackR18eHedgeAgainstASheddingServer: GetStock hedged (copies
// after shedHedgeDelay, up to 3, UNAVAILABLE non-fatal) against a service
// whose normal limit is one and which sheds with UNAVAILABLE: the first
// copy holds the only place until both later copies are shed (the second
// at its turn, the third after the second's 10 ms pushback). The handler runs once,
// and the caller gets the answer of the copy that ran, not the refusal of
// one that the server never ran.
func TestAttackR18eHedgeAgainstASheddingServer(t *testing.T) {
	r := newHedgeShedRig(t, codes.Unavailable, 10*time.Millisecond, 2, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "hedged"})
	if err != nil || resp.GetUnits() != 42 {
		t.Errorf("hedged GetStock: %v, %v; want the answer of the copy that ran", resp, err)
	}
	if n := r.srv.Calls(getStock); n != 1 {
		t.Errorf("the handler ran %d times, want 1: every later copy is shed", n)
	}
	if s := r.stats(); s.Shed[rserver.PriorityNormal] != 2 || s.InFlight != 0 {
		t.Errorf("guard stats %+v: want the two later copies shed and no place held", s)
	}
}

// TestAttackR18ePriorityTravelsOnEveryAttempt: GetStock lowered to low by
// its caller and retried on UNAVAILABLE: the Guard admits each of its
// three attempts as low, none as the annotated normal; without the
// lowering, as normal.
func TestAttackR18ePriorityTravelsOnEveryAttempt(t *testing.T) {
	r := newRig(t, server.Fail(codes.Unavailable), nil)
	low := runtime.WithPriority(context.Background(), policy.PriorityLow)
	if _, err := r.client.GetStock(low, &inventoryv1.GetStockRequest{Sku: "low"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("GetStock against a failing server: %v", err)
	}
	if s := r.stats(); s.Admitted[rserver.PriorityLow] != 3 || s.Admitted[rserver.PriorityNormal] != 0 {
		t.Errorf("admitted %v, want the three attempts as low", s.Admitted)
	}
	if _, err := r.client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "normal"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("GetStock against a failing server: %v", err)
	}
	if s := r.stats(); s.Admitted[rserver.PriorityLow] != 3 || s.Admitted[rserver.PriorityNormal] != 3 {
		t.Errorf("admitted %v, want three low and three normal", s.Admitted)
	}
}

// shedLowThenReserve fills the low place with a held report, has 25
// reports shed with code, and then calls ReserveStock (high). The unary
// calls have 5 s (longTimeouts): what is asked is whether ReserveStock
// is let through, and under the annotated 300 ms its claim on Redis and
// run could time out on a loaded machine.
func shedLowThenReserve(t *testing.T, code codes.Code, opts ...runtime.Option) (*rig, error) {
	t.Helper()
	release := make(chan struct{})
	r := newRig(t, held(release, stockReport),
		[]rserver.Option{shedLimits(policy.Limits{Low: 1, Normal: 10, High: 10, Critical: 10}, code, 10*time.Millisecond)}, append([]runtime.Option{longTimeouts}, opts...)...)
	endHold := holdReport(t, r, release)
	defer endHold()
	waitFor(t, "the low place taken", func() bool { return r.stats().InFlight == 1 })
	for i := range 25 {
		if _, err := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("r", i)}); status.Code(err) != code {
			t.Fatalf("report %d beyond the low limit: %v, want %v", i, err, code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-high", Sku: "a", Units: 1})
	return r, err
}

// TestAttackR18eShedLowWorkWaysAround: the two ways the README gives to
// keep shedding from opening the shared breaker where the server does
// not mark its refusals hold on their own (here beside the mark): shedding
// with RESOURCE_EXHAUSTED (not a failure code of the example's breaker),
// or a breaker of its own for the low-priority method. Either way
// ReserveStock (high) is served after 25 reports were shed.
func TestAttackR18eShedLowWorkWaysAround(t *testing.T) {
	t.Run("RESOURCE_EXHAUSTED", func(t *testing.T) {
		if r, err := shedLowThenReserve(t, codes.ResourceExhausted); err != nil || r.srv.Calls(reserveStock) != 1 {
			t.Errorf("ReserveStock after low work shed with RESOURCE_EXHAUSTED: %v, server ran %d; want it served", err, r.srv.Calls(reserveStock))
		}
	})
	t.Run("per-method breaker", func(t *testing.T) {
		own := runtime.WithPolicy(func(p *policy.Service) {
			b := *p.Breaker
			p.Methods[3].Breaker = &b
		})
		if r, err := shedLowThenReserve(t, codes.Unavailable, own); err != nil || r.srv.Calls(reserveStock) != 1 {
			t.Errorf("ReserveStock after low work shed, reports with their own breaker: %v, server ran %d; want it served", err, r.srv.Calls(reserveStock))
		}
	})
}

// TestAttackR18eShedLowWorkDoesNotCutOffHighWork: the service sheds with
// UNAVAILABLE (the default code, a failure code of the breaker) and has
// room for one low request, which a report holds; 25 further reports
// (low) are shed. The server still has nine places for high work, and
// the client's one breaker towards the dependency counted none of the
// marked refusals: ReserveStock (high) reaches the server and is served.
func TestAttackR18eShedLowWorkDoesNotCutOffHighWork(t *testing.T) {
	r, err := shedLowThenReserve(t, codes.Unavailable)
	if st, _ := r.client.Runtime().BreakerState(reserveStock); err != nil || st != runtime.StateClosed || r.srv.Calls(reserveStock) != 1 {
		t.Errorf("ReserveStock (high) while only low work is shed: %v (breaker %v, server ran %d); want it served", err, st, r.srv.Calls(reserveStock))
	}
}

// shedClock is a fake clock for the breaker's window and cool-down.
type shedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *shedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *shedClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// metricSum is the sum of the values of the series of the metric name in
// reg whose labels match.
func metricSum(t *testing.T, reg *prometheus.Registry, name string, match func(labels map[string]string) bool) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if !match(labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// attemptsCoded matches the attempts_total series of method (its short name)
// ending with code.
func attemptsCoded(method, code string) func(map[string]string) bool {
	return func(l map[string]string) bool {
		return strings.HasSuffix(l["method"], method) && l["code"] == code
	}
}

// fullLowShedding is the rig of the tests below: the service's one low
// place is held by a report (the plain client's), so that every further
// low request is shed with UNAVAILABLE and pushback, while nine places
// are left for normal and high work. other, if not nil, answers the
// methods other than StockReport.
func fullLowShedding(t *testing.T, other server.Behaviour, pushback time.Duration, opts ...runtime.Option) *rig {
	t.Helper()
	release := make(chan struct{})
	hold := held(release, stockReport)
	b := func(ctx context.Context, c server.Call) error {
		if other != nil && c.Method != stockReport {
			return other(ctx, c)
		}
		return hold(ctx, c)
	}
	r := newRig(t, b, []rserver.Option{shedLimits(policy.Limits{Low: 1, Normal: 10, High: 10, Critical: 10}, codes.Unavailable, pushback)}, opts...)
	endHold := holdReport(t, r, release)
	t.Cleanup(endHold)
	waitFor(t, "the low place taken", func() bool { return r.stats().InFlight == 1 })
	return r
}

// TestAttackR18eBreakerStaysClosedUnderFullLowShedding: every low
// request (StockReport) is shed, forty of them interleaved with forty
// high ones (ReserveStock), far past the breaker's twenty calls at a
// ratio of one half. The breaker counts the marked refusals as nothing:
// it stays closed, every high call is served by the server, and the
// metrics still count each refusal under UNAVAILABLE. The unary calls
// have 5 s (longTimeouts): under the annotated 300 ms, a ReserveStock's
// claim on Redis and run took longer at load 10 and the attempt timed out.
func TestAttackR18eBreakerStaysClosedUnderFullLowShedding(t *testing.T) {
	const rounds = 40
	reg := prometheus.NewRegistry()
	r := fullLowShedding(t, nil, 10*time.Millisecond, longTimeouts, runtime.WithRegisterer(reg))
	for i := range rounds {
		if _, err := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("r", i)}); status.Code(err) != codes.Unavailable || errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("report %d: %v, want the server's shed UNAVAILABLE", i, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: fmt.Sprint("o-", i), Sku: "a", Units: 1})
		cancel()
		if err != nil {
			t.Fatalf("ReserveStock %d (high) while only low work is shed: %v", i, err)
		}
		if st, _ := r.client.Runtime().BreakerState(reserveStock); st != runtime.StateClosed {
			t.Fatalf("after %d shed reports the breaker is %v, want closed", i+1, st)
		}
	}
	if n := r.srv.Calls(reserveStock); n != rounds {
		t.Errorf("the server ran %d ReserveStock calls, want %d", n, rounds)
	}
	if s := r.stats(); s.Shed[rserver.PriorityLow] != rounds || s.Admitted[rserver.PriorityHigh] != rounds || s.Shed[rserver.PriorityHigh] != 0 {
		t.Errorf("guard stats %+v: want %d low refusals, %d high admitted, none shed", s, rounds, rounds)
	}
	if n := metricSum(t, reg, "resilient_client_attempts_total", attemptsCoded("StockReport", "UNAVAILABLE")); n != rounds {
		t.Errorf("the metrics count %v StockReport attempts under UNAVAILABLE, want %d", n, rounds)
	}
}

// markedAs answers StockReport with code and the given details, the
// other methods at once.
func markedAs(code codes.Code, details ...protoadapt.MessageV1) server.Behaviour {
	return func(_ context.Context, c server.Call) error {
		if c.Method != stockReport {
			return nil
		}
		st, err := status.New(code, "injected").WithDetails(details...)
		if err != nil {
			return err
		}
		return st.Err()
	}
}

func shedInfo(domain string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: runtime.ShedReason, Domain: domain, Metadata: map[string]string{"priority": "low"}}
}

// TestAttackR18eOnlyTheGuardsMarkKeepsTheBreakerClosed: a server without
// a Guard (a shedding proxy, a server in another language: a Guard takes
// the mark out of what its own handlers return, TestShedMarkIsNotPassedOn)
// fails 25 reports. Plain UNAVAILABLE, a SHED mark of another
// domain, or the mark on a code no Guard sheds with (DEADLINE_EXCEEDED, a
// failure code of the example's breaker) are failures: the breaker opens
// and ReserveStock is refused on the client. The Guard's mark on
// UNAVAILABLE, even after five hundred other details, is nothing, and
// ReserveStock is served.
func TestAttackR18eOnlyTheGuardsMarkKeepsTheBreakerClosed(t *testing.T) {
	many := make([]protoadapt.MessageV1, 0, 501)
	for i := range 500 {
		many = append(many, &errdetails.DebugInfo{Detail: fmt.Sprint("noise ", i)})
	}
	many = append(many, shedInfo(runtime.DoNotRetryDomain))
	for _, tc := range []struct {
		name  string
		b     server.Behaviour
		opens bool
	}{
		{"plain UNAVAILABLE", markedAs(codes.Unavailable), true},
		{"a mark of another domain", markedAs(codes.Unavailable, shedInfo("example.com")), true},
		{"the mark on DEADLINE_EXCEEDED", markedAs(codes.DeadlineExceeded, shedInfo(runtime.DoNotRetryDomain)), true},
		{"the mark with another reason", markedAs(codes.Unavailable, &errdetails.ErrorInfo{Reason: "SHED ", Domain: runtime.DoNotRetryDomain}), true},
		{"the mark after 500 details", markedAs(codes.Unavailable, many...), false},
		{"the mark on RESOURCE_EXHAUSTED listed as a failure", markedAs(codes.ResourceExhausted, shedInfo(runtime.DoNotRetryDomain)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed := runtime.WithPolicy(func(p *policy.Service) {
				p.Breaker.FailureCodes = policy.CodesOf(codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted)
			})
			r := newBareRig(t, tc.b, listed)
			for i := range 25 {
				if _, err := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("r", i)}); err == nil {
					t.Fatalf("report %d: served, want the injected failure", i)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
			st, _ := r.client.Runtime().BreakerState(reserveStock)
			if tc.opens {
				if !errors.Is(err, runtime.ErrCircuitOpen) || st != runtime.StateOpen || r.srv.Calls(reserveStock) != 0 {
					t.Errorf("ReserveStock after 25 failures: %v (breaker %v, server ran %d); want it refused by the open breaker", err, st, r.srv.Calls(reserveStock))
				}
				return
			}
			if err != nil || st != runtime.StateClosed || r.srv.Calls(reserveStock) != 1 {
				t.Errorf("ReserveStock after 25 marked refusals: %v (breaker %v, server ran %d); want it served", err, st, r.srv.Calls(reserveStock))
			}
		})
	}
}

// TestAttackR18eShedProbeLeavesTheBreakerHalfOpen: the breaker opened on
// twenty plain failures of GetStock; after its cool-down (a fake clock)
// five reports in a row, more than its three probes, are sent as probes
// and shed by the Guard. Each shed probe neither closes nor reopens the
// breaker and frees its place: every report reaches the server (none is
// refused on the client), the breaker is still half-open, and three
// ReserveStock calls then close it.
func TestAttackR18eShedProbeLeavesTheBreakerHalfOpen(t *testing.T) {
	clock := &shedClock{now: time.Unix(1e9, 0)}
	b := func(_ context.Context, c server.Call) error {
		if c.Method == getStock {
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	}
	plain := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Retry, p.Methods[0].Cache = nil, nil
	})
	r := fullLowShedding(t, b, 10*time.Millisecond, runtime.WithClock(clock), plain)
	for i := range 20 {
		if _, err := r.client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", i)}); status.Code(err) != codes.Unavailable {
			t.Fatalf("GetStock %d: %v, want UNAVAILABLE", i, err)
		}
	}
	if st, _ := r.client.Runtime().BreakerState(reserveStock); st != runtime.StateOpen {
		t.Fatalf("after 20 failures the breaker is %v, want open", st)
	}
	clock.advance(2*time.Second + time.Millisecond) // the cool-down
	for i := range 5 {
		_, err := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("p", i)})
		if status.Code(err) != codes.Unavailable || errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("report %d in half-open: %v, want the server's shed refusal", i, err)
		}
		if st, _ := r.client.Runtime().BreakerState(reserveStock); st != runtime.StateHalfOpen {
			t.Fatalf("after %d shed probes the breaker is %v, want half-open", i+1, st)
		}
	}
	if s := r.stats(); s.Shed[rserver.PriorityLow] != 5 {
		t.Errorf("the Guard shed %d reports, want the 5 probes", s.Shed[rserver.PriorityLow])
	}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: fmt.Sprint("o-", i), Sku: "a", Units: 1})
		cancel()
		if err != nil {
			t.Fatalf("ReserveStock %d as a probe: %v", i, err)
		}
	}
	if st, _ := r.client.Runtime().BreakerState(reserveStock); st != runtime.StateClosed || r.srv.Calls(reserveStock) != 3 {
		t.Errorf("after three served probes the breaker is %v (server ran %d ReserveStock), want closed after 3", st, r.srv.Calls(reserveStock))
	}
}

// TestAttackR18eShedRefusalsAreOverloadForTheAdaptiveLayers: the shed
// refusals the breaker ignores are still overload for the client
// throttle, which comes to refuse reports locally (forty sent: each was
// shed or throttled, some throttled), and for the adaptive concurrency
// limit, which falls from its initial twenty.
func TestAttackR18eShedRefusalsAreOverloadForTheAdaptiveLayers(t *testing.T) {
	const sent = 40
	t.Run("throttle", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		throttled := runtime.WithPolicy(func(p *policy.Service) {
			p.ClientThrottle = &policy.Throttle{K: 1.1, Window: 10 * time.Second, MaxRefusal: 0.9}
		})
		r := fullLowShedding(t, nil, 10*time.Millisecond, throttled, runtime.WithRegisterer(reg))
		local := 0
		for i := range sent {
			_, err := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("r", i)})
			switch {
			case errors.Is(err, runtime.ErrThrottled):
				local++
			case status.Code(err) != codes.Unavailable:
				t.Fatalf("report %d: %v, want shed or throttled", i, err)
			}
		}
		if shed := int(r.stats().Shed[rserver.PriorityLow]); local == 0 || shed+local != sent {
			t.Errorf("%d reports throttled, %d shed by the server, of %d; want some throttled and the rest shed", local, shed, sent)
		}
		if p := metricSum(t, reg, "resilient_client_throttle_refusal_probability", func(map[string]string) bool { return true }); p < 0.5 {
			t.Errorf("the throttle's refusal probability is %v after %d shed refusals, want it above 0.5", p, sent)
		}
		if st, _ := r.client.Runtime().BreakerState(reserveStock); st != runtime.StateClosed {
			t.Errorf("the breaker is %v, want closed", st)
		}
	})
	t.Run("adaptive limit", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		limited := runtime.WithPolicy(func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 8, MaxLimit: 8} })
		r := fullLowShedding(t, nil, 10*time.Millisecond, limited, runtime.WithRegisterer(reg))
		all := func(map[string]string) bool { return true }
		if l := metricSum(t, reg, "resilient_client_adaptive_limit", all); l != 8 {
			t.Fatalf("the adaptive limit starts at %v, want 8", l)
		}
		for i := range sent {
			if _, err := r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("r", i)}); status.Code(err) != codes.Unavailable {
				t.Fatalf("report %d: %v, want UNAVAILABLE", i, err)
			}
		}
		if l := metricSum(t, reg, "resilient_client_adaptive_limit", all); l >= 8 {
			t.Errorf("the adaptive limit is %v after %d shed refusals, want it fallen below 8", l, sent)
		}
	})
}

// TestAttackR18eShedRetriesWaitThePushback: GetStock lowered to low and
// shed on each of its three attempts with an 80 ms pushback: the retries
// wait it (two waits, at least 160 ms, more than the policy's jittered
// backoff of at most 50 + 100 ms could), the Guard shed three attempts,
// and the breaker, which counted none, is closed. GetStock's timeout is
// 5 s (longTimeouts): its cache's shared call, which all three attempts
// and both waits share, is bounded by it, and the annotated 300 ms left a
// loaded machine 140 ms for three attempts (at load 8 the third could not
// start in time).
func TestAttackR18eShedRetriesWaitThePushback(t *testing.T) {
	const pushback = 80 * time.Millisecond
	reg := prometheus.NewRegistry()
	r := fullLowShedding(t, nil, pushback, longTimeouts, runtime.WithRegisterer(reg))
	low := runtime.WithPriority(context.Background(), policy.PriorityLow)
	start := time.Now()
	_, err := r.client.GetStock(low, &inventoryv1.GetStockRequest{Sku: "low"})
	took := time.Since(start)
	if status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrRetriesExhausted) {
		t.Errorf("GetStock shed on every attempt: %v, want UNAVAILABLE, retries exhausted", err)
	}
	if took < 2*pushback {
		t.Errorf("three shed attempts took %v, want at least two pushbacks of %v", took, pushback)
	}
	if s := r.stats(); s.Shed[rserver.PriorityLow] != 3 {
		t.Errorf("the Guard shed %d attempts, want 3", s.Shed[rserver.PriorityLow])
	}
	if n := metricSum(t, reg, "resilient_client_attempts_total", attemptsCoded("GetStock", "UNAVAILABLE")); n != 3 {
		t.Errorf("the metrics count %v GetStock attempts under UNAVAILABLE, want 3", n)
	}
	if st, _ := r.client.Runtime().BreakerState(getStock); st != runtime.StateClosed {
		t.Errorf("the breaker is %v, want closed", st)
	}
}

// TestAttackR18eShedStreamsLeaveTheBreakerClosed: WatchStock opened
// lowered to low while the low place is held: the Guard sheds each
// stream, whose first Recv returns the marked refusal. Thirty such streams
// (past the breaker's twenty calls) leave the shared breaker closed and
// the stream's permits free, and ReserveStock is served.
func TestAttackR18eShedStreamsLeaveTheBreakerClosed(t *testing.T) {
	r := fullLowShedding(t, nil, 10*time.Millisecond)
	low := runtime.WithPriority(context.Background(), policy.PriorityLow)
	for i := range 30 {
		s, err := r.client.WatchStock(low, &inventoryv1.WatchStockRequest{Sku: fmt.Sprint("w", i)})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.Unavailable || errors.Is(err, runtime.ErrCircuitOpen) {
			t.Fatalf("stream %d: %v, want the server's shed refusal", i, err)
		}
	}
	if s := r.stats(); s.Shed[rserver.PriorityLow] != 30 {
		t.Errorf("the Guard shed %d streams, want 30", s.Shed[rserver.PriorityLow])
	}
	if n, _ := r.client.Runtime().BulkheadInUse(watchStock); n != 0 {
		t.Errorf("%d stream permits still taken, want 0", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := r.client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "a", Units: 1})
	if st, _ := r.client.Runtime().BreakerState(reserveStock); err != nil || st != runtime.StateClosed {
		t.Errorf("ReserveStock after 30 shed streams: %v (breaker %v), want it served", err, st)
	}
}
