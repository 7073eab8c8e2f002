package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/internal/throttle"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The README ("Logs and events"): the throttler's refusals are reported
// once at the first refusal of an episode; "the episode is over when the
// layer admits an attempt a second or more after its last refusal, and
// the next refusal is reported again". An attempt the throttler admits
// and the concurrency limit behind it then refuses was admitted by the
// throttler all the same: its episode is over, and its next refusal is a
// new event. Two methods share the throttler; the second has a limit of
// its own, of 1, held by a call in flight.
func TestAttack25aThrottlerEpisodeEndsAtAnAdmissionTheLimitRefuses(t *testing.T) {
	const other = "/t.Dep/Other"
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var kinds []EventKind
	obs := func(e Event) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() }
	p := adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{Window: 10 * time.Second}
		p.Methods[0].Retry = nil
		p.Methods = append(p.Methods, policy.Method{Name: other, Idempotent: true, Timeout: 300 * time.Millisecond,
			AdaptiveLimit: &policy.AdaptiveLimit{InitialLimit: 1, MaxLimit: 1}})
	})
	c, clock := adClient(t, p, WithRegisterer(reg), WithObserver(obs))
	var draw atomic.Value
	draw.Store(0.5)
	th, err := throttle.New(throttle.Policy(*c.policy.ClientThrottle), c.base, func() float64 { return draw.Load().(float64) })
	if err != nil {
		t.Fatal(err)
	}
	c.Method(0).throttle.t = th // the client's one throttler, which both methods share
	if c.Method(1).throttle.t != th {
		t.Fatal("the methods do not share the throttler")
	}

	// Other's one permit, held by a call in flight.
	gate := make(chan struct{})
	in := make(chan struct{})
	heldCall := &scripted{answer: func(context.Context, int64) error { in <- struct{}{}; <-gate; return nil }}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = Unary(context.Background(), c.Method(1), "", &adMsg{}, nil, heldCall.call, nil) })
	<-in
	defer func() { close(gate); wg.Wait() }()

	// An outage of Get: the throttler refuses most attempts, one event.
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	refusals := 0
	for range 10 {
		if err := adCall(context.Background(), c, down, nil); errors.Is(err, ErrThrottled) {
			refusals++
		}
	}
	if refusals == 0 {
		t.Fatal("the throttler refused nothing")
	}
	// Two seconds later the throttler admits an attempt of Other (a draw
	// above any probability), which the limit refuses.
	clock.advance(2 * time.Second)
	draw.Store(0.999)
	ok := &scripted{answer: func(context.Context, int64) error { return nil }}
	if _, err := Unary(context.Background(), c.Method(1), "", &adMsg{}, nil, ok.call, nil); !errors.Is(err, ErrConcurrencyLimited) {
		t.Fatalf("Other: %v, want ErrConcurrencyLimited", err)
	}
	// The throttler's next refusal begins a new episode.
	draw.Store(0.0)
	if err := adCall(context.Background(), c, down, nil); !errors.Is(err, ErrThrottled) {
		t.Fatalf("Get: %v, want ErrThrottled", err)
	}
	if got := testutil.ToFloat64(c.Method(0).adaptiveMetrics.throttled); got != float64(refusals+1) {
		t.Errorf("throttled_total{method=Get} %v, want %d", got, refusals+1)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []EventKind{EventThrottled, EventConcurrencyLimited, EventThrottled}
	if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

// The README: throttle_refusal_probability is "the throttler's
// probability of refusing an attempt, as of its last decision". After an
// outage has raised it above 0.5 and the throttler's window has forgotten
// the outage, the throttler admits an attempt at probability 0; that
// attempt's caller cancels it (an outcome the throttler does not record).
// The gauge must say 0, the probability of that last decision, not the
// outage's.
func TestAttack25aThrottleGaugeFollowsADecisionWhoseOutcomeIsIgnored(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{Window: time.Second}
		p.Methods[0].Retry = nil
	}), WithRegisterer(reg))
	fixedThrottle(t, c, 0.5)
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	for range 10 {
		_ = adCall(context.Background(), c, down, nil)
	}
	gauge := c.Method(0).throttle.gauge
	if got := testutil.ToFloat64(gauge); got <= 0.5 {
		t.Fatalf("throttle_refusal_probability %v after the outage, want above 0.5", got)
	}
	clock.advance(3 * time.Second) // the window forgets the outage
	if p := c.Method(0).throttle.t.RefusalProbabilityAt(c.now()); p != 0 {
		t.Fatalf("refusal probability %v after the window, want 0", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := &scripted{answer: func(context.Context, int64) error { cancel(); return context.Canceled }}
	if err := adCall(ctx, c, cancelled, nil); cancelled.calls.Load() != 1 {
		t.Fatalf("the attempt was not admitted: %v", err)
	}
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Errorf("throttle_refusal_probability %v after an attempt admitted at probability 0, want 0", got)
	}
}

// The same, for an attempt the throttler admits and the open breaker
// behind it refuses: the gauge follows the throttler's decision.
func TestAttack25aThrottleGaugeFollowsADecisionTheBreakerRefuses(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{Window: time.Second}
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		p.Methods[0].Retry = nil
	}), WithRegisterer(reg))
	fixedThrottle(t, c, 0.5)
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	_ = adCall(context.Background(), c, down, nil) // fails: the breaker opens
	if s := c.Method(0).breaker.stateAt(c.now()); s != StateOpen {
		t.Fatalf("breaker %v, want open", s)
	}
	gauge := c.Method(0).throttle.gauge
	if got := testutil.ToFloat64(gauge); got == 0 {
		t.Fatalf("throttle_refusal_probability 0 after a failure, want above")
	}
	clock.advance(3 * time.Second) // the throttler forgets; the breaker stays open
	ok := &scripted{answer: func(context.Context, int64) error { return nil }}
	if err := adCall(context.Background(), c, ok, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("%v, want the open breaker's refusal", err)
	}
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Errorf("throttle_refusal_probability %v after an attempt admitted at probability 0, want 0", got)
	}
}
