package runtime

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/internal/throttle"
	"github.com/go-resilient/resilient/runtime/internal/window"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Attacks on the adaptive layers' promises (README "Adaptive concurrency
// limit", "Client-side throttling", "Count window"), from the promises
// alone: on the fake clock where the state machine is the point, against a
// real loopback server where the network is (attack_adaptive_fault_test.go).

// TestAttackAdaptiveBadOptionsRefusedNamingTheField: every value that
// cannot work is refused by NewClient (the path WithPolicy and overrides end
// in) with an error naming the field, never a panic, never a silent
// default.
func TestAttackAdaptiveBadOptionsRefusedNamingTheField(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		edit func(*policy.Service)
		want string
	}{
		{"NaN tolerance", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: nan} }, "AdaptiveLimit.Tolerance: must be a finite number of at least 1, got NaN"},
		{"+Inf tolerance", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: math.Inf(1)} }, "AdaptiveLimit.Tolerance: must be a finite number of at least 1, got +Inf"},
		{"negative tolerance", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{Tolerance: -2} }, "AdaptiveLimit.Tolerance: must be a finite number of at least 1, got -2"},
		{"NaN smoothing", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{Smoothing: nan} }, "AdaptiveLimit.Smoothing: must be in (0, 1], got NaN"},
		{"smoothing above 1", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{Smoothing: 1.5} }, "AdaptiveLimit.Smoothing: must be in (0, 1], got 1.5"},
		{"negative min", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: -1} }, "AdaptiveLimit.MinLimit: must be at least 1, got -1"},
		{"min above max", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 10, MaxLimit: 5} }, "AdaptiveLimit.MinLimit: MinLimit 10 is above MaxLimit 5"},
		{"negative max", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MaxLimit: -3} }, "AdaptiveLimit.MaxLimit: must be at least 1, got -3"},
		{"max beyond 2^20", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MaxLimit: 1<<20 + 1} }, "AdaptiveLimit.MaxLimit: must be at most 1048576, got 1048577"},
		{"initial below min", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 5, InitialLimit: 2} }, "AdaptiveLimit.InitialLimit: InitialLimit 2 is not between MinLimit 5 and MaxLimit 100"},
		{"negative baseline", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{BaselineWindow: -time.Second} }, "AdaptiveLimit.BaselineWindow: must be at least 10ns, got -1s"},
		{"negative max under a bulkhead", func(p *policy.Service) {
			p.Bulkhead = &policy.Bulkhead{Permits: 4}
			p.AdaptiveLimit = &policy.AdaptiveLimit{MaxLimit: -1}
		}, "AdaptiveLimit.MaxLimit: must be at least 1, got -1"},
		{"method min above max", func(p *policy.Service) {
			p.Methods[0].AdaptiveLimit = &policy.AdaptiveLimit{MinLimit: 9, MaxLimit: 3}
		}, "(/t.Dep/Get).AdaptiveLimit.MinLimit: MinLimit 9 is above MaxLimit 3"},
		{"NaN k", func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{K: nan} }, "ClientThrottle.K: must be a finite number of at least 1, got NaN"},
		{"k below 1", func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{K: 0.5} }, "ClientThrottle.K: must be a finite number of at least 1, got 0.5"},
		{"negative k", func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{K: -2} }, "ClientThrottle.K: must be a finite number of at least 1, got -2"},
		{"NaN max refusal", func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{MaxRefusal: nan} }, "ClientThrottle.MaxRefusal: must be in (0, 1), got NaN"},
		{"negative max refusal", func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{MaxRefusal: -0.1} }, "ClientThrottle.MaxRefusal: must be in (0, 1), got -0.1"},
		{"negative throttle window", func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{Window: -time.Second} }, "ClientThrottle.Window: must be at least 10ns, got -1s"},
		{"window calls beyond the max", func(p *policy.Service) {
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, WindowCalls: window.MaxCount + 1, CoolDown: time.Second, HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)}
		}, "Breaker.WindowCalls: must be in [1, 2097152]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := adPolicy(tc.edit)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("NewClient panicked: %v", r)
					}
				}()
				_, err = NewClient(&p)
			}()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestAttackAdaptiveLimitRecoversFromMinAndStaysUnderMax: an overload of
// drops (RESOURCE_EXHAUSTED) takes the limit to its minimum; once the dependency answers again
// at its baseline latency, rounds that fill the limit grow it back to
// max_limit, and it never passes max_limit however long the dependency
// stays fast. No token is left held.
func TestAttackAdaptiveLimitRecoversFromMinAndStaysUnderMax(t *testing.T) {
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 16, MaxLimit: 24}
		p.Methods[0].Retry = nil
	}))
	l := c.Method(0).concurrency.l
	// The overload: each round of drops halves once, down to 1.
	for range 8 {
		release, done, _ := hold(t, c, l.Limit(), overloaded)
		clock.advance(300 * time.Millisecond)
		release()
		done.Wait()
	}
	if l.Limit() != 1 || l.InFlight() != 0 {
		t.Fatalf("after the outage: limit %d, %d in flight; want 1, 0", l.Limit(), l.InFlight())
	}
	// The recovery: rounds that use the whole limit, 5 ms each.
	rounds, peak := 0, 0
	for ; rounds < 200 && l.Limit() < 24; rounds++ {
		release, done, _ := hold(t, c, l.Limit(), nil)
		clock.advance(5 * time.Millisecond)
		release()
		done.Wait()
		peak = max(peak, l.Limit())
	}
	if l.Limit() != 24 {
		t.Fatalf("after %d rounds of answers at the baseline the limit is %d, want it back at max_limit 24", rounds, l.Limit())
	}
	for range 50 {
		release, done, _ := hold(t, c, l.Limit(), nil)
		clock.advance(5 * time.Millisecond)
		release()
		done.Wait()
		peak = max(peak, l.Limit())
	}
	if peak > 24 || l.InFlight() != 0 {
		t.Fatalf("under a fast dependency the limit reached %d (max 24), %d tokens held", peak, l.InFlight())
	}
	t.Logf("from 1 back to 24 in %d rounds", rounds)
}

// TestAttackThrottlerOutageThenRecoveryWithNotFound: during an outage the
// throttler never refuses more than max_refusal of the attempts (some
// always reach the dependency), and a dependency that answers NOT_FOUND
// (an answer, an accept) is refused nothing once the outage has left the
// window: two windows after the recovery every attempt goes out. A fresh
// client whose dependency only ever answers NOT_FOUND is refused nothing.
func TestAttackThrottlerOutageThenRecoveryWithNotFound(t *testing.T) {
	notFound := status.Error(codes.NotFound, "no such item")
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{Window: time.Second, MaxRefusal: 0.5}
		p.Methods[0].Retry = nil
	}))
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	const outage = 2000
	throttled := 0
	for range outage {
		err := adCall(context.Background(), c, down, nil)
		if errors.Is(err, ErrThrottled) {
			throttled++
		}
		clock.advance(time.Millisecond)
	}
	// max_refusal 0.5: at least about half of the attempts go out.
	if sent := down.calls.Load(); sent < outage*4/10 || int(sent)+throttled != outage {
		t.Fatalf("outage: %d attempts reached the dependency, %d throttled, of %d; want at least 40 %% sent (max_refusal 0.5)", sent, throttled, outage)
	}
	up := &scripted{answer: func(context.Context, int64) error { return notFound }}
	late := 0
	for i := range 3000 { // 3 s: three windows
		err := adCall(context.Background(), c, up, nil)
		if errors.Is(err, ErrThrottled) && i >= 2000 {
			late++
		} else if err != nil && !errors.Is(err, ErrThrottled) && status.Code(err) != codes.NotFound {
			t.Fatalf("recovery: %v", err)
		}
		clock.advance(time.Millisecond)
	}
	if late != 0 {
		t.Fatalf("%d attempts refused more than two windows after the recovery, the dependency answering NOT_FOUND throughout", late)
	}

	c2, clock2 := adClient(t, adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{}
		p.Methods[0].Retry = nil
	}))
	healthy := &scripted{answer: func(context.Context, int64) error { return notFound }}
	for range 1000 {
		if err := adCall(context.Background(), c2, healthy, nil); status.Code(err) != codes.NotFound || errors.Is(err, ErrThrottled) {
			t.Fatalf("a healthy dependency answering NOT_FOUND: %v", err)
		}
		clock2.advance(time.Millisecond)
	}
	if healthy.calls.Load() != 1000 {
		t.Fatalf("%d of 1000 NOT_FOUND calls reached the dependency", healthy.calls.Load())
	}
}

// TestAttackThrottleRefusalIsNotRetriedNorCountedByTheBreaker: a
// throttler's refusal on a call that would retry is final (one attempt
// only, none after it), reaches the fallback with ErrThrottled, and the
// breaker (which opens on one failure in its window) never sees it.
func TestAttackThrottleRefusalIsNotRetriedNorCountedByTheBreaker(t *testing.T) {
	c, clock := adClient(t, adPolicy(func(p *policy.Service) {
		p.ClientThrottle = &policy.Throttle{MaxRefusal: 0.9}
		p.Breaker = &policy.Breaker{FailureRatio: 1, MinimumCalls: 1, WindowCalls: 1, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Internal)}
	}))
	// The dependency answers UNAVAILABLE (not a breaker failure code here):
	// the throttler sees refusals, the breaker sees successes.
	down := &scripted{answer: func(context.Context, int64) error { return unavailable }}
	var fellBack, throttled int
	fb := func(_ context.Context, _ *adMsg, err error) (*adMsg, error) {
		fellBack++
		if errors.Is(err, ErrThrottled) {
			throttled++
		}
		return &adMsg{}, nil
	}
	for range 300 {
		before := down.calls.Load()
		if err := adCall(context.Background(), c, down, fb); err != nil {
			t.Fatalf("the fallback answers: %v", err)
		}
		if n := down.calls.Load() - before; n > 3 {
			t.Fatalf("one call made %d attempts, max_attempts is 3", n)
		}
		clock.advance(time.Millisecond)
	}
	if throttled == 0 || fellBack != 300 {
		t.Fatalf("%d calls fell back, %d with ErrThrottled; want 300, some throttled", fellBack, throttled)
	}
	if st := c.Method(0).breaker.stateAt(c.now()); st != StateClosed {
		t.Fatalf("breaker %v after throttled refusals and UNAVAILABLE answers (not its failure codes)", st)
	}
	// A caller that cancels never reaches the fallback, throttled or not.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fellBack = 0
	for range 50 {
		if err := adCall(ctx, c, down, fb); status.Code(err) != codes.Canceled {
			t.Fatalf("cancelled caller: %v", err)
		}
	}
	if fellBack != 0 {
		t.Fatalf("the fallback answered %d cancelled callers", fellBack)
	}
}

// TestAttackCountWindowOfOneAndHugeUnderConcurrentAdds: a count window of
// one call holds exactly the last outcome whatever the concurrency; one of
// window.MaxCount holds every outcome exactly, with no drift of its totals
// from concurrent adds, and a Reset empties it.
func TestAttackCountWindowOfOneAndHugeUnderConcurrentAdds(t *testing.T) {
	one, err := window.NewCount(1)
	if err != nil {
		t.Fatal(err)
	}
	huge, err := window.NewCount(window.MaxCount)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 5000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				f := uint64((w + i) % 2)
				one.Add(0, 1, f)
				huge.Add(0, 1, 1)
				// While the first adds are in progress together, a reader
				// may see the ring before the first of them moved the total
				// (0 outcomes); never more than one.
				if o, fl := one.Sum(0); o > 1 || fl > o {
					t.Errorf("window of one holds %d outcomes, %d failures", o, fl)
					return
				}
			}
		})
	}
	wg.Wait()
	if o, _ := one.Sum(0); o != 1 {
		t.Fatalf("window of one after the adds: %d outcomes, want 1", o)
	}
	if o, f := huge.Sum(0); o != workers*each || f != workers*each {
		t.Fatalf("huge window after %d failures: %d outcomes, %d failures", workers*each, o, f)
	}
	one.Add(0, 1, 1)
	if o, f := one.Sum(0); o != 1 || f != 1 {
		t.Fatalf("window of one after a failure: %d, %d", o, f)
	}
	one.Add(0, 1, 0)
	if o, f := one.Sum(0); o != 1 || f != 0 {
		t.Fatalf("window of one after a success: %d, %d", o, f)
	}
	huge.Reset()
	for range workers {
		wg.Go(func() {
			for range each {
				huge.Add(0, 1, 0)
			}
		})
	}
	wg.Wait()
	if o, f := huge.Sum(0); o != workers*each || f != 0 {
		t.Fatalf("huge window after a reset and %d successes: %d outcomes, %d failures", workers*each, o, f)
	}
}

// TestAttackBreakerWithWindowCallsOfOne: window_calls 1 and minimum_calls
// 1: one failure opens; after the cool-down a successful probe closes, and
// then the next failure alone opens again (the ring forgot the success
// before it).
func TestAttackBreakerWithWindowCallsOfOne(t *testing.T) {
	p := testBreakerPolicy()
	p.Window, p.WindowCalls, p.MinimumCalls, p.HalfOpenProbes = 0, 1, 1, 1
	b, _ := newTestBreaker(p)
	now := t0
	for range 20 {
		call(t, b, now, outcomeSuccess)
	}
	wantState(t, b, now, StateClosed)
	call(t, b, now, outcomeFailure)
	wantState(t, b, now, StateOpen)
	now = now.Add(p.CoolDown)
	call(t, b, now, outcomeSuccess)
	wantState(t, b, now, StateClosed)
	call(t, b, now, outcomeSuccess)
	call(t, b, now, outcomeFailure)
	wantState(t, b, now, StateOpen)
}

// TestAttackThrottlerClimbAfterAHealthySpell: the README said that during
// an outage the refusal probability climbs to its cap "within about ten
// attempts". That holds from an empty window only; after a healthy spell
// the window's accepts must first be outnumbered K to one, or forgotten:
// at 100 attempts/s after 5 s of accepts (the default window), the cap
// comes after about 450 attempts, 4.5 s into the outage (as the README
// now says).
func TestAttackThrottlerClimbAfterAHealthySpell(t *testing.T) {
	base := t0
	th, err := throttle.New(throttle.Policy{}, base, func() float64 { return 0.999 }) // never refuses below the cap
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	step := int64(10 * time.Millisecond)
	for range 500 { // 5 s of accepts
		th.RecordAt(n, true)
		n += step
	}
	attempts := 0
	for th.RefusalProbabilityAt(n) < 0.9 && attempts < 10000 {
		th.RecordAt(n, false)
		n += step
		attempts++
	}
	if attempts <= 20 {
		t.Fatalf("the cap came after %d failed attempts; the README's 'about ten' would hold", attempts)
	}
	if attempts > 1000 {
		t.Fatalf("the cap came only after %d failed attempts (%v)", attempts, time.Duration(int64(attempts)*step))
	}
	t.Logf("after 5 s of accepts at 100/s, the cap came after %d failed attempts (%v)", attempts, time.Duration(int64(attempts)*step))
}
