package runtime

import (
	"context"
	"errors"
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

	"github.com/go-resilient/resilient/runtime/internal/throttle"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The adaptive layers as wired into a client, driven by a fake clock and a
// scripted call: the state machines of the primitives have their own tests
// (runtime/internal/adaptive, throttle, window); these check what the
// runtime feeds them and what it does with their refusals.

const adMethod = "/t.Dep/Get"

type adClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *adClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *adClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type adMsg struct{}

// adPolicy is a dependency with one idempotent unary method that retries
// on UNAVAILABLE, a 300 ms per-attempt timeout, and edit's changes.
func adPolicy(edit func(*policy.Service)) policy.Service {
	p := policy.Service{Name: "t.Dep", Methods: []policy.Method{{
		Name: adMethod, Idempotent: true, Timeout: 300 * time.Millisecond,
		Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Multiplier: 1,
			RetryableCodes: policy.CodesOf(codes.Unavailable, codes.ResourceExhausted)},
	}}}
	if edit != nil {
		edit(&p)
	}
	return p
}

func adClient(t *testing.T, p policy.Service, opts ...Option) (*Client, *adClock) {
	t.Helper()
	clock := &adClock{now: t0}
	c, err := NewClient(&p, append([]Option{WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

// scripted is a call that counts its invocations and answers with answer.
type scripted struct {
	calls  atomic.Int64
	answer func(ctx context.Context, n int64) error
}

func (s *scripted) call(ctx context.Context, _ *adMsg, _ ...grpc.CallOption) (*adMsg, error) {
	n := s.calls.Add(1)
	if err := s.answer(ctx, n); err != nil {
		return nil, err
	}
	return &adMsg{}, nil
}

func adCall(ctx context.Context, c *Client, s *scripted, fallback func(context.Context, *adMsg, error) (*adMsg, error)) error {
	_, err := Unary(ctx, c.Method(0), "", &adMsg{}, nil, s.call, fallback)
	return err
}

var unavailable = status.Error(codes.Unavailable, "down")

// overloaded is a drop for the adaptive limit: the dependency says it is
// overloaded (an UNAVAILABLE says it is down or failing, the breaker's).
var overloaded = status.Error(codes.ResourceExhausted, "overloaded")

// hold starts n calls that block in the dependency until release is
// closed, then answer with err; it returns once all n are in the call.
func hold(t *testing.T, c *Client, n int, err error) (release func(), done *sync.WaitGroup, s *scripted) {
	t.Helper()
	gate := make(chan struct{})
	in := make(chan struct{}, n)
	s = &scripted{answer: func(context.Context, int64) error {
		in <- struct{}{}
		<-gate
		return err
	}}
	done = &sync.WaitGroup{}
	for range n {
		done.Go(func() { _ = adCall(context.Background(), c, s, nil) })
	}
	for range n {
		<-in
	}
	return func() { close(gate) }, done, s
}

// TestAdaptiveLimitRefusesAboveTheLimitAndHalvesOncePerRound: 8 attempts
// in flight fill an initial limit of 8; the 9th is refused at once with
// ErrConcurrencyLimited (RESOURCE_EXHAUSTED), without reaching the
// dependency and without a retry. The 8 come back RESOURCE_EXHAUSTED together:
// the limit halves once, to 4, not once per drop.
func TestAdaptiveLimitRefusesAboveTheLimitAndHalvesOncePerRound(t *testing.T) {
	c, _ := adClient(t, adPolicy(func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 8, MaxLimit: 16}
		p.Methods[0].Retry = nil
	}))
	release, done, _ := hold(t, c, 8, overloaded)
	s := &scripted{answer: func(context.Context, int64) error { return nil }}
	err := adCall(context.Background(), c, s, nil)
	if !errors.Is(err, ErrConcurrencyLimited) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("9th attempt: %v (code %v), want ErrConcurrencyLimited, RESOURCE_EXHAUSTED", err, status.Code(err))
	}
	if s.calls.Load() != 0 {
		t.Fatalf("the refused attempt reached the dependency")
	}
	release()
	done.Wait()
	l := c.Method(0).concurrency.l
	if l.Limit() != 4 || l.InFlight() != 0 {
		t.Fatalf("after 8 drops of one round: limit %d, in flight %d; want 4, 0", l.Limit(), l.InFlight())
	}
	release, done, _ = hold(t, c, 4, nil)
	if err := adCall(context.Background(), c, s, nil); !errors.Is(err, ErrConcurrencyLimited) {
		t.Fatalf("5th attempt under a limit of 4: %v", err)
	}
	release()
	done.Wait()
}

// TestAdaptiveRefusalIsFinalLocalAndReachesTheFallback: a retrying method
// whose retry is refused by the limit ends there: the fallback sees
// ErrConcurrencyLimited with the attempt's RESOURCE_EXHAUSTED as its cause, the
// breaker records nothing of the refusal (it stays closed with a minimum of
// one call), and the retry budget counts no request for a refused first
// attempt.
func TestAdaptiveRefusalIsFinalLocalAndReachesTheFallback(t *testing.T) {
	c, _ := adClient(t, adPolicy(func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 1, MaxLimit: 1}
		p.Breaker = &policy.Breaker{FailureRatio: 1, MinimumCalls: 1, Window: time.Second, CoolDown: time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.ResourceExhausted)}
	}))
	release, done, _ := hold(t, c, 1, nil) // holds the only permit
	var seen error
	fb := func(_ context.Context, _ *adMsg, err error) (*adMsg, error) { seen = err; return &adMsg{}, nil }
	s := &scripted{answer: func(context.Context, int64) error { return nil }}
	for range 20 {
		if err := adCall(context.Background(), c, s, fb); err != nil {
			t.Fatalf("fallback did not answer: %v", err)
		}
	}
	if !errors.Is(seen, ErrConcurrencyLimited) || s.calls.Load() != 0 {
		t.Fatalf("fallback saw %v after %d calls, want ErrConcurrencyLimited after none", seen, s.calls.Load())
	}
	if st, _ := c.BreakerState(adMethod); st != StateClosed {
		t.Fatalf("20 local refusals moved the breaker to %v", st)
	}
	release()
	done.Wait()
	// A retry refused by the limit: of a limit of 2, another call holds
	// one permit; the first attempt comes back RESOURCE_EXHAUSTED, a drop
	// that halves the limit to 1, so the retry finds none left.
	c2, _ := adClient(t, adPolicy(func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 2, MaxLimit: 2}
	}))
	release, done, _ = hold(t, c2, 1, nil)
	retrier := &scripted{answer: func(context.Context, int64) error { return overloaded }}
	err := adCall(context.Background(), c2, retrier, nil)
	release()
	done.Wait()
	if !errors.Is(err, ErrConcurrencyLimited) || retrier.calls.Load() != 1 {
		t.Fatalf("retry under a full limit: %v after %d attempts, want ErrConcurrencyLimited after 1", err, retrier.calls.Load())
	}
	var e *Error
	if !errors.As(err, &e) || status.Code(e.Cause) != codes.ResourceExhausted {
		t.Fatalf("refusal's cause %v, want the attempt's RESOURCE_EXHAUSTED", e)
	}
}

// TestAdaptiveLimitIgnoresTheCallersEndAndReturnsEveryToken: an attempt
// whose caller cancelled it, one the breaker refused after the limit
// admitted it, and one whose call panicked, all give their token back and
// leave the limit where it was.
func TestAdaptiveLimitIgnoresTheCallersEndAndReturnsEveryToken(t *testing.T) {
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 4, MaxLimit: 4}
		p.Breaker = &policy.Breaker{FailureRatio: 1, MinimumCalls: 1, Window: time.Second, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Internal)}
		p.Methods[0].Retry = nil
	}))
	l := c.Method(0).concurrency.l
	ctx, cancel := context.WithCancel(context.Background())
	s := &scripted{answer: func(ctx context.Context, n int64) error {
		cancel()
		return status.FromContextError(context.Canceled).Err()
	}}
	if err := adCall(ctx, c, s, nil); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v", err)
	}
	if l.Limit() != 4 || l.InFlight() != 0 {
		t.Fatalf("after a cancelled attempt: limit %d, in flight %d; want 4, 0", l.Limit(), l.InFlight())
	}
	func() {
		defer func() { _ = recover() }()
		p := &scripted{answer: func(context.Context, int64) error { panic("boom") }}
		_ = adCall(context.Background(), c, p, nil)
	}()
	if l.Limit() != 4 || l.InFlight() != 0 {
		t.Fatalf("after a panic: limit %d, in flight %d; want 4, 0", l.Limit(), l.InFlight())
	}
	// Open the breaker (INTERNAL is its failure code), then be refused by it.
	internal := &scripted{answer: func(context.Context, int64) error { return status.Error(codes.Internal, "x") }}
	_ = adCall(context.Background(), c, internal, nil)
	clock.advance(time.Millisecond)
	for range 10 {
		if err := adCall(context.Background(), c, internal, nil); !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("want the breaker's refusal, got %v", err)
		}
	}
	if internal.calls.Load() != 1 || l.InFlight() != 0 {
		t.Fatalf("breaker refusals: %d calls, %d tokens held; want 1, 0", internal.calls.Load(), l.InFlight())
	}
	if l.Limit() != 4 {
		t.Fatalf("INTERNAL (an answer, to the limit) moved the limit to %d", l.Limit())
	}
}

// TestAdaptiveLimitGrowsBackWhenTheDependencyIsFastAgain: from its
// minimum, successes at the baseline latency grow the limit round by
// round on the fake clock.
func TestAdaptiveLimitGrowsBackWhenTheDependencyIsFastAgain(t *testing.T) {
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 1, MaxLimit: 20}
		p.Methods[0].Retry = nil
	}))
	l := c.Method(0).concurrency.l
	s := &scripted{answer: func(context.Context, int64) error { clock.advance(40 * time.Millisecond); return nil }}
	for range 40 {
		if err := adCall(context.Background(), c, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	// One call at a time uses the whole limit only while it is 1 or 2: the
	// limit grows no further than a sequential caller needs.
	if got := l.Limit(); got < 2 || got > 3 {
		t.Fatalf("after 40 sequential successes at the baseline: limit %d, want 2 or 3", got)
	}
}

// fixedRandom makes the throttler's draws fixed, so that a refusal
// probability p refuses exactly when p > r.
func fixedThrottle(t *testing.T, c *Client, r float64) {
	t.Helper()
	th, err := throttle.New(throttle.Policy(*c.policy.ClientThrottle), c.base, func() float64 { return r })
	if err != nil {
		t.Fatal(err)
	}
	c.Method(0).throttle.t = th
}

// TestThrottlerRefusesLocallyDuringAnOutageAndLetsRecoveryThrough: after
// 10 attempts refused UNAVAILABLE the refusal probability is 10/11, capped
// at 0.9: a draw below it is refused locally, as UNAVAILABLE matching
// ErrThrottled, without reaching the dependency, and ends the retry loop.
// Once the window has forgotten the outage, the next attempt goes through.
func TestThrottlerRefusesLocallyDuringAnOutageAndLetsRecoveryThrough(t *testing.T) {
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{Window: time.Second}
		p.Methods[0].Retry = nil
	}))
	fixedThrottle(t, c, 0.5)
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	for i := range 10 {
		// (1 − 0)/(1+1) = 0.5 after the first: not above the draw; 2/3 after the second.
		err := adCall(context.Background(), c, down, nil)
		if i < 2 && errors.Is(err, ErrThrottled) {
			t.Fatalf("attempt %d throttled at probability %v", i+1, c.Method(0).throttle.t.RefusalProbability(clock.Now()))
		}
	}
	sent := down.calls.Load()
	p := c.Method(0).throttle.t.RefusalProbability(clock.Now())
	if p != 0.9 {
		t.Fatalf("refusal probability %v after an outage, want the cap 0.9", p)
	}
	err := adCall(context.Background(), c, down, nil)
	if !errors.Is(err, ErrThrottled) || status.Code(err) != codes.Unavailable || down.calls.Load() != sent {
		t.Fatalf("%v (code %v), %d calls; want ErrThrottled, UNAVAILABLE, no call", err, status.Code(err), down.calls.Load()-sent)
	}
	clock.advance(1100 * time.Millisecond)
	up := &scripted{answer: func(context.Context, int64) error { return nil }}
	if err := adCall(context.Background(), c, up, nil); err != nil || up.calls.Load() != 1 {
		t.Fatalf("after the window: %v, %d calls; want an answer", err, up.calls.Load())
	}
}

// TestThrottlerCountsAnswersAsAcceptsAndIgnoresTheCaller: NOT_FOUND is an
// answer (accepted); a cancelled attempt is not recorded at all.
func TestThrottlerCountsAnswersAsAcceptsAndIgnoresTheCaller(t *testing.T) {
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{Window: time.Second}
		p.Methods[0].Retry = nil
	}))
	fixedThrottle(t, c, 0)
	th := c.Method(0).throttle.t
	nf := &scripted{answer: func(context.Context, int64) error { return status.Error(codes.NotFound, "no") }}
	for range 20 {
		if err := adCall(context.Background(), c, nf, nil); status.Code(err) != codes.NotFound {
			t.Fatalf("%v", err)
		}
	}
	if p := th.RefusalProbability(clock.Now()); p != 0 {
		t.Fatalf("20 NOT_FOUND answers: refusal probability %v, want 0", p)
	}
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		cc := &scripted{answer: func(context.Context, int64) error { cancel(); return status.Error(codes.Canceled, "gone") }}
		_ = adCall(ctx, c, cc, nil)
	}
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	// 20 requests / 20 accepts: refusals begin once requests exceed 40.
	// Each UNAVAILABLE adds a request: 20 more leave (40−40)/41 = 0, the
	// 21st makes it positive. Had the cancelled attempts counted, the
	// 16th would.
	for i := range 20 {
		_ = adCall(context.Background(), c, down, nil)
		if p := th.RefusalProbability(clock.Now()); p != 0 {
			t.Fatalf("refusal %v after %d failures: the cancelled attempts were counted", p, i+1)
		}
	}
	_ = adCall(context.Background(), c, down, nil)
	if p := th.RefusalProbability(clock.Now()); p <= 0 {
		t.Fatalf("refusal %v after 21 failures over 20 accepts, want above 0", p)
	}
}

// TestCountWindowBreakerJudgesTheLastNCallsWhateverTheirAge: with
// WindowCalls 10, five failures an hour ago still count (a time window
// would have forgotten them), and five more open the breaker; ten
// successes push old failures out.
func TestCountWindowBreakerJudgesTheLastNCallsWhateverTheirAge(t *testing.T) {
	p := testBreakerPolicy()
	p.Window, p.WindowCalls = 0, 10
	b, tr := newTestBreaker(p)
	now := t0
	for range 5 {
		call(t, b, now, outcomeFailure)
	}
	now = now.Add(time.Hour)
	for range 4 {
		call(t, b, now, outcomeFailure)
	}
	wantState(t, b, now, StateClosed) // 9 calls, fewer than the minimum of 10
	call(t, b, now, outcomeFailure)
	wantState(t, b, now, StateOpen)
	wantTransitions(t, tr, "closed->open")

	b, _ = newTestBreaker(p)
	for range 4 {
		call(t, b, now, outcomeFailure)
	}
	for range 10 {
		call(t, b, now, outcomeSuccess)
	}
	for range 4 {
		call(t, b, now, outcomeFailure)
	}
	// The ring holds the last 10: 6 successes, 4 failures.
	wantState(t, b, now, StateClosed)
	call(t, b, now, outcomeFailure)
	wantState(t, b, now, StateOpen)
}

// TestAdaptivePoliciesAreValidated: what cannot work is refused, naming
// the field.
func TestAdaptivePoliciesAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*policy.Service)
		want string
	}{
		{"min above permits", func(p *policy.Service) {
			p.Bulkhead = &policy.Bulkhead{Permits: 4}
			p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 5}
		}, "AdaptiveLimit.MinLimit: 5 is above the bulkhead's 4 permits"},
		{"initial above permits", func(p *policy.Service) {
			p.Bulkhead = &policy.Bulkhead{Permits: 4}
			p.Methods[0].AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 8}
		}, "(/t.Dep/Get).AdaptiveLimit.InitialLimit: 8 is above the bulkhead's 4 permits"},
		{"tolerance", func(p *policy.Service) {
			p.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: 0.5}
		}, "AdaptiveLimit.Tolerance: must be a finite number of at least 1, got 0.5"},
		{"stream", func(p *policy.Service) {
			p.Methods[0].Kind, p.Methods[0].Retry = policy.KindServerStreaming, nil
			p.Methods[0].AdaptiveLimit = &policy.AdaptiveLimit{}
		}, "streams take no adaptive token"},
		{"max refusal", func(p *policy.Service) {
			p.ClientThrottle = &policy.Throttle{MaxRefusal: 1}
		}, "ClientThrottle.MaxRefusal: must be in (0, 1), got 1:"},
		{"window calls", func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 20, WindowCalls: 10, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		}, "Breaker.MinimumCalls: 20 is more than the 10 calls the window holds"},
		{"negative window calls", func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, WindowCalls: -1, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		}, "Breaker.WindowCalls: must be in [1, 2097152]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := adPolicy(tc.edit)
			_, err := NewClient(&p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	p := adPolicy(func(p *policy.Service) {
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 5, WindowCalls: 10, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		p.Bulkhead = &policy.Bulkhead{Permits: 8}
		p.AdaptiveLimit = &policy.AdaptiveLimit{}
		p.ClientThrottle = &policy.Throttle{}
	})
	c, err := NewClient(&p)
	if err != nil {
		t.Fatalf("a count window without a time window, defaults for the rest: %v", err)
	}
	if got := c.Method(0).concurrency.l.Policy(); got.MaxLimit != 8 || got.InitialLimit != 8 {
		t.Fatalf("under 8 permits: %+v, want the ceiling 8 as max and initial limit", got)
	}
}

// TestAdaptiveMetricsAndEventsOncePerEpisode: refusals are counted per
// method, the limit and the refusal probability are gauges, and each layer
// reports one event per episode, again after a quiet second.
func TestAdaptiveMetricsAndEventsOncePerEpisode(t *testing.T) {
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var kinds []EventKind
	obs := func(e Event) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() }
	p := adPolicy(func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 1, MaxLimit: 1}
		p.ClientThrottle = &policy.Throttle{Window: time.Second}
		p.Methods[0].Retry = nil
	})
	c, clock := adClient(t, p, WithRegisterer(reg), WithObserver(obs))
	release, done, _ := hold(t, c, 1, nil)
	ok := &scripted{answer: func(context.Context, int64) error { return nil }}
	for range 5 {
		_ = adCall(context.Background(), c, ok, nil)
	}
	release()
	done.Wait()
	if got := testutil.ToFloat64(c.Method(0).adaptiveMetrics.limited); got != 5 {
		t.Fatalf("adaptive_rejections_total %v, want 5", got)
	}
	if got := testutil.ToFloat64(c.Method(0).concurrency.gauge); got != 1 {
		t.Fatalf("adaptive_limit %v, want 1", got)
	}
	clock.advance(2 * time.Second)
	_ = adCall(context.Background(), c, ok, nil) // admitted after a quiet second: the episode is over
	release, done, _ = hold(t, c, 1, nil)
	_ = adCall(context.Background(), c, ok, nil)
	release()
	done.Wait()

	fixedThrottle(t, c, 0)
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	for range 10 {
		_ = adCall(context.Background(), c, down, nil)
	}
	th := testutil.ToFloat64(c.Method(0).adaptiveMetrics.throttled)
	if th < 5 {
		t.Fatalf("throttled_total %v after 10 calls into an outage, want most of them", th)
	}
	if got := testutil.ToFloat64(c.Method(0).throttle.gauge); got <= 0.5 {
		t.Fatalf("throttle_refusal_probability %v, want above 0.5", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []EventKind{EventConcurrencyLimited, EventConcurrencyLimited, EventThrottled}
	if len(kinds) != len(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}
}

// TestHedgedCopyRefusedByTheLimitEndsTheCall: with one permit held, a
// hedged call's first copy is refused by the limit and the call returns
// the refusal at once.
func TestHedgedCopyRefusedByTheLimitEndsTheCall(t *testing.T) {
	c, _ := adClient(t, adPolicy(func(p *policy.Service) {
		p.Methods[0].Retry = nil
		p.Methods[0].Hedging = &policy.Hedging{Delay: 50 * time.Millisecond, MaxCopies: 2, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 1, MaxLimit: 1}
	}))
	release, done, _ := hold(t, c, 1, nil)
	defer func() { release(); done.Wait() }()
	s := &scripted{answer: func(context.Context, int64) error { return nil }}
	begin := time.Now()
	err := adCall(context.Background(), c, s, nil)
	if !errors.Is(err, ErrConcurrencyLimited) || s.calls.Load() != 0 || time.Since(begin) > 40*time.Millisecond {
		t.Fatalf("%v after %d calls in %v; want ErrConcurrencyLimited at once", err, s.calls.Load(), time.Since(begin))
	}
}

// TestAdaptiveLayersDescribed: Describe shows the shared limit with the
// bulkhead's ceiling applied, the throttler, a method's own limit, and the
// count window, with the values in force.
func TestAdaptiveLayersDescribed(t *testing.T) {
	p := adPolicy(func(p *policy.Service) {
		p.Bulkhead = &policy.Bulkhead{Permits: 8}
		p.AdaptiveLimit = &policy.AdaptiveLimit{}
		p.ClientThrottle = &policy.Throttle{K: 3}
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 5, WindowCalls: 50, CoolDown: time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		p.Methods = append(p.Methods, policy.Method{Name: "/t.Dep/Own", Timeout: time.Second,
			AdaptiveLimit: &policy.AdaptiveLimit{MinLimit: 2, MaxLimit: 4}})
	})
	c, _ := adClient(t, p)
	got := c.Describe()
	for _, want := range []string{
		"  adaptive_limit (shared): min_limit 1, max_limit 8, initial_limit 8, tolerance 1.5, smoothing 0.5, baseline_window 30s\n",
		"  client_throttle: k 3, window 5s, max_refusal 0.9\n",
		"/t.Dep/Get\n    unary, idempotent: true, idempotency_key: none, timeout: 300ms, overall_timeout: none\n",
		"    adaptive_limit: shared\n",
		"    adaptive_limit (own): min_limit 2, max_limit 4, initial_limit 4, tolerance 1.5, smoothing 0.5, baseline_window 30s\n",
		"window 0s (ignored: window_calls is set), window_calls 50,",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
}
