package example_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// rig25f is the example server behind the example's own Guard
// (server.NewGuard, memory store) with guardOpts, reached directly by the
// generated client built with clientOpts. A tap of the test's wraps the
// Guard's (its own checks first, then TapHandle, as the README says)
// and records when each request of each method reached the door,
// refused or not.
type rig25f struct {
	srv    *server.Server
	guard  *rserver.Guard
	cc     *grpc.ClientConn
	client *inventoryv1.InventoryServiceResilientClient

	mu      sync.Mutex
	arrived map[string][]time.Time
}

func newRig25f(t *testing.T, b server.Behaviour, guardOpts []rserver.Option, clientOpts ...runtime.Option) *rig25f {
	t.Helper()
	g, err := server.NewGuard(guardOpts...)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig25f{guard: g, arrived: map[string][]time.Time{}}
	count := func(ctx context.Context, info *tap.Info) (context.Context, error) {
		r.mu.Lock()
		r.arrived[info.FullMethodName] = append(r.arrived[info.FullMethodName], time.Now())
		r.mu.Unlock()
		return g.TapHandle(ctx, info)
	}
	// gRPC takes one InTapHandle (a second panics in NewServer): the
	// Guard's interceptors without its ServerOptions, and the test's tap.
	opts := []grpc.ServerOption{grpc.InTapHandle(count),
		grpc.ChainUnaryInterceptor(g.UnaryInterceptor), grpc.ChainStreamInterceptor(g.StreamInterceptor), grpc.WaitForHandlers(true)}
	r.srv, err = server.Start("127.0.0.1:0", b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.srv.Stop)
	r.cc, err = grpc.NewClient(r.srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cc.Close() })
	r.client, err = inventoryv1.NewInventoryServiceResilientClient(r.cc, inventoryv1.InventoryServiceResilientOptions{Runtime: clientOpts})
	if err != nil {
		t.Fatal(err)
	}
	readyConn(t, r.cc)
	return r
}

func (r *rig25f) stats() rserver.Stats {
	s, _ := r.guard.Stats(inventoryName)
	return s
}

// arrivals is when the requests of method reached the door.
func (r *rig25f) arrivals(method string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.arrived[method]...)
}

// noClientLimits takes the generated client's own bulkhead and rate limit
// away, and GetStock's cache, so that every call the test makes reaches
// the server: what is counted is the Guard's doing.
var noClientLimits = runtime.WithPolicy(func(p *policy.Service) {
	p.Bulkhead, p.RateLimit = nil, nil
	for i := range p.Methods {
		p.Methods[i].Cache, p.Methods[i].Bulkhead = nil, nil
	}
})

// serverEdit edits the server policy of the method named.
func serverEdit(method string, edit func(m *policy.ServerMethod)) rserver.Option {
	return rserver.WithPolicy(inventoryName, func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == method {
				edit(&p.Methods[i])
			}
		}
	})
}

// TestAttack25fClaimedCriticalIsCappedUnderConcurrentLoad: every caller
// of the generated client claims critical (runtime.WithPriority). Limits
// low 2, normal 4, high 6, critical 8, shed with RESOURCE_EXHAUSTED (not
// retried), every admitted call held in its handler. Ten StockReports at
// once (annotated low) are admitted as low up to the low limit, two, and
// eight are shed as low; then ten GetStocks at once (normal) fill the
// normal limit, two more, eight shed as normal; then ten ReserveStocks
// (high), two more, eight shed as high. Nothing is granted critical; each
// call reaches the door once; a shed call never reaches its handler; and
// once the held calls are let go every place comes back.
func TestAttack25fClaimedCriticalIsCappedUnderConcurrentLoad(t *testing.T) {
	release := make(chan struct{})
	r := newRig25f(t, held(release, stockReport, getStock, reserveStock),
		[]rserver.Option{shedLimits(policy.Limits{Low: 2, Normal: 4, High: 6, Critical: 8}, codes.ResourceExhausted, time.Second)},
		noClientLimits, longTimeouts)
	critical := runtime.WithPriority(context.Background(), policy.PriorityCritical)
	var wg sync.WaitGroup
	var shedErrs, otherErrs atomic.Int64
	var bad sync.Map
	call := func(name string, f func() error) {
		wg.Go(func() {
			err := f()
			switch {
			case err == nil:
			case status.Code(err) == codes.ResourceExhausted:
				shedErrs.Add(1)
			default:
				otherErrs.Add(1)
				bad.Store(name, err)
			}
		})
	}
	for _, phase := range []struct {
		method string
		prio   rserver.Priority
		send   func(i int) error
	}{
		{stockReport, rserver.PriorityLow, func(i int) error {
			_, err := r.client.StockReport(critical, &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("w", i)})
			return err
		}},
		{getStock, rserver.PriorityNormal, func(i int) error {
			_, err := r.client.GetStock(critical, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", i)})
			return err
		}},
		{reserveStock, rserver.PriorityHigh, func(i int) error {
			_, err := r.client.ReserveStock(critical, &inventoryv1.ReserveStockRequest{OrderId: fmt.Sprint("o", i), Sku: "a", Units: 1})
			return err
		}},
	} {
		before := shedErrs.Load()
		for i := range 10 {
			call(fmt.Sprint(phase.method, i), func() error { return phase.send(i) })
		}
		waitFor(t, phase.method+": two held and eight shed", func() bool {
			s := r.stats()
			return s.Admitted[phase.prio] == 2 && s.Shed[phase.prio] == 8 && r.srv.Calls(phase.method) == 2 && shedErrs.Load()-before == 8
		})
		if n := len(r.arrivals(phase.method)); n != 10 {
			t.Errorf("%s: %d requests reached the door for 10 calls", phase.method, n)
		}
	}
	s := r.stats()
	if s.InFlight != 6 || s.Admitted[rserver.PriorityCritical] != 0 || s.Shed[rserver.PriorityCritical] != 0 {
		t.Errorf("while held: %+v; want 6 in flight and nothing granted or refused as critical", s)
	}
	close(release)
	wg.Wait()
	if n := otherErrs.Load(); n != 0 {
		bad.Range(func(k, v any) bool { t.Errorf("%s: %v", k, v); return true })
	}
	if n := shedErrs.Load(); n != 24 {
		t.Errorf("%d calls shed, want 24", n)
	}
	waitFor(t, "every place back", func() bool { return r.stats().InFlight == 0 })
	for _, m := range []string{stockReport, getStock, reserveStock} {
		if n := r.srv.Calls(m); n != 2 {
			t.Errorf("%s ran %d times, want the 2 admitted", m, n)
		}
	}
}

// TestAttack25fHostilePriorityHeaderIsCapped: a caller that writes the
// header itself (metadata, not runtime.WithPriority), claiming critical
// on StockReport (low) in every form a header can take: alone, twice,
// beside a value the server does not know, in upper case. With the low
// limit full, each is shed as low, never reaches the handler, and none
// is granted above low.
func TestAttack25fHostilePriorityHeaderIsCapped(t *testing.T) {
	release := make(chan struct{})
	r := newRig25f(t, held(release, stockReport),
		[]rserver.Option{shedLimits(policy.Limits{Low: 1, Normal: 4, High: 6, Critical: 8}, codes.ResourceExhausted, time.Second)},
		noClientLimits, longTimeouts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.client.StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "hold"})
	}()
	defer func() { close(release); <-done }()
	waitFor(t, "the low place held", func() bool { return r.srv.Calls(stockReport) == 1 })
	plain := inventoryv1.NewInventoryServiceClient(r.cc)
	for i, md := range []metadata.MD{
		metadata.Pairs(rserver.PriorityHeader, "critical"),
		metadata.Pairs(rserver.PriorityHeader, "critical", rserver.PriorityHeader, "critical"),
		metadata.Pairs(rserver.PriorityHeader, "critical", rserver.PriorityHeader, "urgent"),
		metadata.Pairs(rserver.PriorityHeader, "CRITICAL"),
		metadata.Pairs(rserver.PriorityHeader, "critical,critical"),
		metadata.Pairs(rserver.PriorityHeader, "high"),
	} {
		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 5*time.Second)
		_, err := plain.StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: fmt.Sprint("x", i)})
		cancel()
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("StockReport with %v while the low limit is full: %v, want it shed", md, err)
		}
	}
	s := r.stats()
	if s.Shed[rserver.PriorityLow] != 6 || s.Admitted[rserver.PriorityLow] != 1 || s.InFlight != 1 {
		t.Errorf("%+v; want the 6 shed as low, the held one admitted as low", s)
	}
	for q := rserver.PriorityNormal; q <= rserver.PriorityCritical; q++ {
		if s.Admitted[q] != 0 || s.Shed[q] != 0 {
			t.Errorf("%s: admitted %d shed %d, want nothing above low", q, s.Admitted[q], s.Shed[q])
		}
	}
	if n := r.srv.Calls(stockReport); n != 1 {
		t.Errorf("StockReport ran %d times, want the held one only", n)
	}
}

// TestAttack25fPushbackSpacesAndEndsTheRetries: the service is full
// (limits 1, a held StockReport) and sheds with UNAVAILABLE, which
// GetStock retries (3 attempts, 50 ms backoff), with a pushback of
// 1.2 s. A GetStock with 2 s: its second attempt reaches the door at
// least the pushback after the first (not the 50 ms backoff), and there
// is no third, since a second pushback would end past the deadline; the
// caller has the shed UNAVAILABLE back long before its deadline. With
// 5 s, three attempts, each at least a pushback after the last, and no
// more: MaxAttempts. The handler never runs.
func TestAttack25fPushbackSpacesAndEndsTheRetries(t *testing.T) {
	const pushback = 1200 * time.Millisecond
	release := make(chan struct{})
	r := newRig25f(t, held(release, stockReport),
		[]rserver.Option{shedLimits(policy.Limits{Low: 1, Normal: 1, High: 1, Critical: 1}, codes.Unavailable, pushback)},
		noClientLimits, longTimeouts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = inventoryv1.NewInventoryServiceClient(r.cc).StockReport(context.Background(), &inventoryv1.StockReportRequest{Warehouse: "hold"})
	}()
	defer func() { close(release); <-done }()
	waitFor(t, "the service full", func() bool { return r.stats().InFlight == 1 && r.srv.Calls(stockReport) == 1 })
	for _, tc := range []struct {
		deadline time.Duration
		attempts int
	}{{2 * time.Second, 2}, {5 * time.Second, 3}} {
		before := len(r.arrivals(getStock))
		ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
		start := time.Now()
		_, err := r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("p", tc.deadline)})
		took := time.Since(start)
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("GetStock (%v) against a full service: %v, want the shed UNAVAILABLE", tc.deadline, err)
		}
		if d, ok := runtime.Pushback(err, nil); !ok || d != pushback {
			t.Errorf("the caller's error carries pushback %v, %v; want %v", d, ok, pushback)
		}
		at := r.arrivals(getStock)[before:]
		if len(at) != tc.attempts {
			t.Errorf("GetStock (%v): %d attempts reached the server, want %d", tc.deadline, len(at), tc.attempts)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < pushback {
				t.Errorf("GetStock (%v): attempt %d came %v after the one before, within the %v pushback", tc.deadline, i+1, gap, pushback)
			}
		}
		if want := time.Duration(tc.attempts-1) * pushback; took < want || took >= tc.deadline {
			t.Errorf("GetStock (%v) took %v, want at least %v and less than its deadline", tc.deadline, took, want)
		}
	}
	if n := r.srv.Calls(getStock); n != 0 {
		t.Errorf("the handler ran %d times while the service was full", n)
	}
}

// deadlineMarked reports whether err carries the Guard's DEADLINE_TOO_SHORT mark.
func deadlineMarked(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == runtime.DeadlineReason && ei.GetDomain() == runtime.DoNotRetryDomain {
			return true
		}
	}
	return false
}

// TestAttack25fMinDeadlineEitherSide: GetStock's MinDeadline made 1 s on
// the server, its client attempts 5 s and DEADLINE_EXCEEDED retryable. A
// caller with 1.6 s is served (the handler runs, nothing refused); one
// with 600 ms is refused DEADLINE_EXCEEDED marked DEADLINE_TOO_SHORT,
// once (the one attempt that reached the door, not retried), at once,
// the handler not run, counted in DeadlineRefused; and no place is left.
func TestAttack25fMinDeadlineEitherSide(t *testing.T) {
	retryDeadline := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Retry.RetryableCodes = policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)
	})
	r := newRig25f(t, nil, []rserver.Option{serverEdit(getStock, func(m *policy.ServerMethod) { m.MinDeadline = time.Second })},
		noClientLimits, longTimeouts, retryDeadline)
	ctx, cancel := context.WithTimeout(context.Background(), 1600*time.Millisecond)
	_, err := r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "above"})
	cancel()
	if err != nil {
		t.Errorf("GetStock with 1.6 s for a MinDeadline of 1 s: %v, want it served", err)
	}
	if n, s := r.srv.Calls(getStock), r.stats(); n != 1 || s.DeadlineRefused != 0 {
		t.Errorf("above: the handler ran %d times, %d refused; want 1 and 0", n, s.DeadlineRefused)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 600*time.Millisecond)
	start := time.Now()
	_, err = r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "below"})
	took := time.Since(start)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded || !deadlineMarked(err) {
		t.Errorf("GetStock with 600 ms for a MinDeadline of 1 s: %v, want DEADLINE_EXCEEDED marked %s", err, runtime.DeadlineReason)
	}
	if took >= 600*time.Millisecond {
		t.Errorf("the refusal came after %v, the caller's whole deadline: it was not the server's", took)
	}
	if n, s, at := r.srv.Calls(getStock), r.stats(), len(r.arrivals(getStock)); n != 1 || s.DeadlineRefused != 1 || at != 2 {
		t.Errorf("below: the handler ran %d times in all, %d refused, %d requests at the door; want 1, 1, 2", n, s.DeadlineRefused, at)
	}
	if s := r.stats(); s.InFlight != 0 {
		t.Errorf("%d places held after both", s.InFlight)
	}
}

// TestAttack25fDefaultTimeoutCancelsTheHandler: the generated client's
// GetStock and WatchStock made to send no deadline (client Timeout 0,
// callers without one), the server's DefaultTimeout 400 ms on both. A
// handler that waits on its context is cancelled: its context had a
// deadline about 400 ms after it started, ends with DeadlineExceeded not
// before it, and the caller gets DEADLINE_EXCEEDED, one attempt (the
// server's own DEADLINE_EXCEEDED is not retried); the stream's caller,
// which reads nothing before the end (an abandoned stream), gets it on
// its Recv. The places come back.
func TestAttack25fDefaultTimeoutCancelsTheHandler(t *testing.T) {
	const dt = 400 * time.Millisecond
	type seen struct {
		err      error
		deadline time.Duration // of the handler's context, from its start
		hasDL    bool
		ran      time.Duration
	}
	saw := make(chan seen, 4)
	wait := func(ctx context.Context, c server.Call) error {
		if c.Method != getStock && c.Method != watchStock {
			return nil
		}
		start := time.Now()
		dl, ok := ctx.Deadline()
		<-ctx.Done()
		saw <- seen{ctx.Err(), dl.Sub(start), ok, time.Since(start)}
		return status.FromContextError(ctx.Err()).Err()
	}
	noDeadline := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Timeout, p.Methods[2].Timeout = 0, 0
	})
	r := newRig25f(t, wait, []rserver.Option{
		serverEdit(getStock, func(m *policy.ServerMethod) { m.DefaultTimeout = dt }),
		serverEdit(watchStock, func(m *policy.ServerMethod) { m.DefaultTimeout = dt }),
	}, noClientLimits, noDeadline)
	check := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%s: %v, want DEADLINE_EXCEEDED", what, err)
		}
		var s seen
		select {
		case s = <-saw:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the handler never ended", what)
		}
		if s.err != context.DeadlineExceeded || !s.hasDL || s.deadline > dt || s.deadline < dt-100*time.Millisecond || s.ran < s.deadline {
			t.Errorf("%s: the handler saw %+v; want its context ended by a deadline of ~%v", what, s, dt)
		}
	}
	_, err := r.client.GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "no-deadline"})
	check("GetStock", err)
	if n := len(r.arrivals(getStock)); n != 1 {
		t.Errorf("GetStock: %d attempts, want 1", n)
	}
	st, err := r.client.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "abandoned"})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing read, nothing cancelled, until the server ends it.
	waitFor(t, "the stream's handler ended", func() bool { return r.srv.Cancelled(watchStock) == 1 })
	_, err = st.Recv()
	check("WatchStock", err)
	waitFor(t, "every place back", func() bool { return r.stats().InFlight == 0 })
}

// TestAttack25fTooShortStreamsLeaveTheBreakerClosed: the breaker the
// generated client shares across its methods counts DEADLINE_EXCEEDED as
// a failure (20 calls, half failing, open it). Thirty WatchStock streams
// opened with 600 ms for a server MinDeadline of 1 s are each refused at
// the door, DEADLINE_EXCEEDED marked DEADLINE_TOO_SHORT, the handler not
// run; the streams' breaker counts them as nothing, so GetStock, whose
// calls have time enough, is still served, not refused by an open breaker.
// The control: thirty streams whose handler answers a plain
// DEADLINE_EXCEEDED do open it.
func TestAttack25fTooShortStreamsLeaveTheBreakerClosed(t *testing.T) {
	t.Run("control: unmarked DEADLINE_EXCEEDED opens the breaker", func(t *testing.T) {
		fail := func(ctx context.Context, c server.Call) error {
			if c.Method == watchStock {
				return status.Error(codes.DeadlineExceeded, "the handler's own")
			}
			return nil
		}
		r := newRig25f(t, fail, nil, noClientLimits, longTimeouts)
		for i := range 30 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := r.client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: fmt.Sprint("w", i)})
			if err == nil {
				_, err = st.Recv()
			}
			cancel()
			if errors.Is(err, runtime.ErrCircuitOpen) {
				return // opened
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "g"}); !errors.Is(err, runtime.ErrCircuitOpen) {
			t.Errorf("GetStock after 30 failed streams: %v, want the breaker open", err)
		}
	})
	r := newRig25f(t, nil, []rserver.Option{serverEdit(watchStock, func(m *policy.ServerMethod) { m.MinDeadline = time.Second })},
		noClientLimits, longTimeouts)
	for i := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		st, err := r.client.WatchStock(ctx, &inventoryv1.WatchStockRequest{Sku: fmt.Sprint("w", i)})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		if status.Code(err) != codes.DeadlineExceeded || !deadlineMarked(err) {
			t.Fatalf("stream %d with 600 ms for a MinDeadline of 1 s: %v, want DEADLINE_EXCEEDED marked %s", i, err, runtime.DeadlineReason)
		}
	}
	if s := r.stats(); s.DeadlineRefused != 30 || s.InFlight != 0 {
		t.Errorf("guard stats %+v; want 30 refused as too short, nothing in flight", s)
	}
	if n := r.srv.Calls(watchStock); n != 0 {
		t.Errorf("WatchStock ran %d times for streams refused at the door", n)
	}
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := r.client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("g", i)})
		cancel()
		if err != nil {
			t.Errorf("GetStock %d after the too-short streams: %v, want it served (the shared breaker closed)", i, err)
		}
	}
}
