package runtime_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack20AdaptiveBeatsAStaticBulkheadAndRecovers attacks the promise
// no test compared head to head: that the adaptive limit sends a slowed
// dependency less than the static bulkhead it sits in, and comes back.
// Two clients of the same policy (8 permits, 100 ms attempts, no breaker,
// no retries), one with an adaptive limit, each against its own hung
// server, 16 callers each for 600 ms. The bulkhead alone keeps 8 attempts
// on the hung server all along (about 48); the limit halves per round
// trip of timeouts (8+4+2+1+1+1+1 = 18, the test allows 28), and its
// refusals come at once while the bulkhead's waiters wait max_wait. When
// both servers answer in 10 ms again, the adaptive client's first answer
// comes within a few round trips and it serves many callers again.
func TestAttack20AdaptiveBeatsAStaticBulkheadAndRecovers(t *testing.T) {
	build := func(adaptive bool) (*fakeSrv, func() (time.Duration, error)) {
		srv, cc := startFault(t, server.Hang)
		c := adaptiveClient(t, cc, func(p *policy.Service) {
			p.Breaker = nil
			p.Bulkhead = &policy.Bulkhead{Permits: 8, MaxWait: 20 * time.Millisecond}
			if adaptive {
				p.AdaptiveLimit = &policy.AdaptiveLimit{}
			}
			p.Methods[0].Timeout, p.Methods[0].Retry = 100*time.Millisecond, nil
		})
		return &fakeSrv{srv.Calls, srv.SetBehaviour}, func() (time.Duration, error) { return getStockOf(context.Background(), c) }
	}
	staticSrv, static := build(false)
	adaptSrv, adapt := build(true)

	type tally struct{ ok, refused, slowRefusals, first atomic.Int64 }
	run := func(call func() (time.Duration, error), d time.Duration, tl *tally) {
		begin := time.Now()
		until := begin.Add(d)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for time.Now().Before(until) {
					took, err := call()
					switch {
					case err == nil:
						tl.ok.Add(1)
						tl.first.CompareAndSwap(0, int64(time.Since(begin)))
					case errors.Is(err, runtime.ErrConcurrencyLimited), errors.Is(err, runtime.ErrBulkheadFull):
						tl.refused.Add(1)
						if took > 15*time.Millisecond {
							tl.slowRefusals.Add(1)
						}
						time.Sleep(time.Millisecond)
					case errors.Is(err, runtime.ErrAttemptTimeout):
					default:
						t.Errorf("unexpected %v", err)
					}
				}
			})
		}
		wg.Wait()
	}
	// sleepLateness is the scheduler's own lateness beside the callers,
	// for d: how late a 1 ms sleep wakes, the worst of the quickest nine
	// tenths.
	sleepLateness := func(d time.Duration, out *time.Duration) {
		var late []time.Duration
		for until := time.Now().Add(d); time.Now().Before(until); {
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			late = append(late, time.Since(t0)-time.Millisecond)
		}
		slices.Sort(late)
		*out = late[len(late)*9/10]
	}
	var st, at tally
	var wg sync.WaitGroup
	var hungLate time.Duration
	wg.Go(func() { run(static, 600*time.Millisecond, &st) })
	wg.Go(func() { run(adapt, 600*time.Millisecond, &at) })
	wg.Go(func() { sleepLateness(600*time.Millisecond, &hungLate) })
	wg.Wait()
	sc, ac := staticSrv.calls(getStock), adaptSrv.calls(getStock)
	t.Logf("hung 600 ms: the static bulkhead sent %d attempts (%d refusals, %d after waiting), the adaptive limit %d (%d refusals, %d slower than 15 ms)",
		sc, st.refused.Load(), st.slowRefusals.Load(), ac, at.refused.Load(), at.slowRefusals.Load())
	if ac > 28 || ac*2 > sc {
		t.Errorf("hung server: the adaptive client sent %d attempts, the static bulkhead %d: want at most 28 and at most half", ac, sc)
	}
	if at.refused.Load() == 0 || at.slowRefusals.Load()*10 > at.refused.Load() && hungLate < 2*time.Millisecond {
		t.Errorf("adaptive: %d refusals, %d of them slower than 15 ms: want them at once", at.refused.Load(), at.slowRefusals.Load())
	}

	staticSrv.set(server.Slow(10 * time.Millisecond))
	adaptSrv.set(server.Slow(10 * time.Millisecond))
	var sr, ar tally
	wg.Go(func() { run(static, 600*time.Millisecond, &sr) })
	wg.Go(func() { run(adapt, 600*time.Millisecond, &ar) })
	var lateP90 time.Duration
	wg.Go(func() { sleepLateness(600*time.Millisecond, &lateP90) })
	wg.Wait()
	t.Logf("recovered 600 ms: static %d answers, adaptive %d (first after %v)", sr.ok.Load(), ar.ok.Load(), time.Duration(ar.first.Load()))
	// On an idle machine the adaptive client serves about 90 % of what the
	// static one does in these 600 ms; on a loaded one the scheduler's
	// jitter makes rounds look queued and the limit grows slower (a fifth
	// was seen), so only the recovery itself is held to a bound: the first
	// answer within the probe's timeout and a few rounds, and the limit
	// letting more than one caller at a time through.
	if f := time.Duration(ar.first.Load()); f == 0 || f > 300*time.Millisecond {
		t.Errorf("adaptive: first answer %v after the recovery, want within 300 ms", f)
	}
	// At load average 12 a 1 ms sleep woke 10 ms late or more and the
	// adaptive client had 1 answer (the static one 11): the count is held
	// only where the scheduler is prompt.
	switch {
	case ar.ok.Load() >= 20:
	case lateP90 < 2*time.Millisecond:
		t.Errorf("after the recovery the adaptive client had %d answers in 600 ms (the static bulkhead %d): want at least 20", ar.ok.Load(), sr.ok.Load())
	default:
		t.Logf("after the recovery: %d answers; the machine is loaded (a 1 ms sleep woke %v late, p90), so the count is not held", ar.ok.Load(), lateP90)
	}
}

// fakeSrv is what the test reads of a fault server and changes on it.
type fakeSrv struct {
	calls func(string) int
	set   func(server.Behaviour)
}

// TestAttack20ABurstThatTimesOutTogetherHalvesTheLimitOnce: the README
// says a drop halves the limit "once per round trip, as TCP does, not once
// per attempt of a burst that timed out together". 16 attempts admitted
// together under a limit of 16 all time out on a hung server: the limit is
// 8 after them, not 1; the next 8 admitted together and timing out take
// it to 4. The server saw the 24 attempts.
func TestAttack20ABurstThatTimesOutTogetherHalvesTheLimitOnce(t *testing.T) {
	srv, cc := startFault(t, server.Hang)
	reg := prometheus.NewRegistry()
	c := adaptiveClient(t, cc, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 16, MaxLimit: 16}
		p.Methods[0].Timeout, p.Methods[0].Retry = 200*time.Millisecond, nil
	}, runtime.WithRegisterer(reg))
	burst := func(n int) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				<-start
				if _, err := getStockOf(context.Background(), c); !errors.Is(err, runtime.ErrAttemptTimeout) {
					t.Errorf("attempt on a hung server: %v, want its timeout", err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	burst(16)
	if l := gaugeValue(t, reg, "resilient_client_adaptive_limit"); l != 8 {
		t.Errorf("limit %v after a burst of 16 timing out together, want 8 (halved once)", l)
	}
	burst(8)
	if l := gaugeValue(t, reg, "resilient_client_adaptive_limit"); l != 4 {
		t.Errorf("limit %v after the next burst of 8, want 4", l)
	}
	// Never more than the 24 admitted. A loaded machine may time an
	// attempt out before the server's handler counted it (CI, load
	// average 5 on 2 cores: 9 of 24 counted), so fewer is only logged.
	switch n := srv.Calls(getStock); {
	case n > 24:
		t.Errorf("server saw %d attempts, want at most the 24 admitted", n)
	case n < 24:
		t.Logf("server counted %d of the 24 attempts admitted (the others timed out before its handler ran)", n)
	}
}

// TestAttack20CallersDeadlineOnlyGivesTheLimitsPlaceBack: the README's
// adaptive limit takes "an attempt that says nothing about the dependency
// (… its call's deadline or overall_timeout passed …)" as giving its place
// back only, so the limit does not move. 16 callers with a 30 ms deadline
// against a hung server, whose attempts' 300 ms timeout the deadline cuts
// first: the limit must still be 16 after them, each time. gRPC reports
// DEADLINE_EXCEEDED a little before the context is marked done, and an
// attempt judged in that moment was taken for a drop, halving the limit
// or not by chance.
func TestAttack20CallersDeadlineOnlyGivesTheLimitsPlaceBack(t *testing.T) {
	srv, cc := startFault(t, server.Hang)
	reg := prometheus.NewRegistry()
	c := adaptiveClient(t, cc, func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 16, MaxLimit: 16}
		p.Methods[0].Timeout, p.Methods[0].Retry = 300*time.Millisecond, nil
	}, runtime.WithRegisterer(reg))
	for round := range 5 {
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
				defer cancel()
				if _, err := getStockOf(ctx, c); status.Code(err) != codes.DeadlineExceeded || errors.Is(err, runtime.ErrAttemptTimeout) {
					t.Errorf("call on a hung server: %v, want the caller's DEADLINE_EXCEEDED", err)
				}
			})
		}
		wg.Wait()
		if l := gaugeValue(t, reg, "resilient_client_adaptive_limit"); l != 16 {
			t.Fatalf("round %d: limit %v after 16 attempts the callers' deadlines ended (the server saw %d), want 16: a caller's deadline says nothing of the dependency", round+1, l, srv.Calls(getStock))
		}
	}
}

// TestAttack20TimeoutEqualToOverallTimeoutIsRefused: the README says a
// method under an adaptive limit needs a per-attempt timeout ("without
// one, a dependency that hangs produces no drop"). A method whose timeout
// equals its overall_timeout (100 ms each, one attempt: a common way to
// write "100 ms, no retries") has none in effect: no attempt ever gets a
// context of its own (the call's is as short), so every attempt on a hung
// server ends by the overall_timeout, which the limit rightly ignores, and
// the limit never falls. Such a policy was accepted; it is now refused at
// construction like one without a timeout, under the service's limit and
// under a method's own, naming both values and how to mend it. The mend
// works: with the timeout below overall_timeout the attempts time out on
// their own and the limit halves per burst.
func TestAttack20TimeoutEqualToOverallTimeoutIsRefused(t *testing.T) {
	_, cc := startFault(t, server.Hang)
	build := func(edit func(*policy.Service), opts ...runtime.Option) (*inventoryv1.InventoryServiceResilientClient, error) {
		o := inventoryv1.InventoryServiceResilientOptions{Runtime: append([]runtime.Option{
			runtime.WithPolicy(withoutCacheAndRateLimit), runtime.WithPolicy(edit)}, opts...)}
		return inventoryv1.NewInventoryServiceResilientClient(cc, o)
	}
	const want = "Methods[0] (/example.inventory.v1.InventoryService/GetStock).AdaptiveLimit: GetStock's Timeout 100ms is as long as its OverallTimeout 100ms: " +
		"no attempt gets a timeout of its own, the whole call's limit cuts each one first, and the limit does not halve on an attempt that limit cut, " +
		"so a dependency that hangs never makes it fall; shorten Timeout below OverallTimeout or lengthen OverallTimeout, or remove the adaptive limit"
	for _, tc := range []struct {
		name string
		edit func(*policy.Service)
	}{
		{"the service's limit", func(p *policy.Service) { p.AdaptiveLimit = &policy.AdaptiveLimit{} }},
		{"the method's own limit", func(p *policy.Service) { p.AdaptiveLimit, p.Methods[0].AdaptiveLimit = nil, &policy.AdaptiveLimit{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := build(func(p *policy.Service) {
				p.Breaker, p.Bulkhead = nil, nil
				tc.edit(p)
				m := &p.Methods[0]
				m.Timeout, m.OverallTimeout, m.Retry = 100*time.Millisecond, 100*time.Millisecond, nil
			})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("client %v, error %v: want it refused with %q", c != nil, err, want)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("%d problems, want the one: %v", n, err)
			}
		})
	}

	reg := prometheus.NewRegistry()
	c, err := build(func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 16, MaxLimit: 16}
		m := &p.Methods[0]
		// 300 ms, not 100: with both timers 50 ms late at load 7 the
		// overall one could fire first and take the attempt's end.
		m.Timeout, m.OverallTimeout, m.Retry = 50*time.Millisecond, 300*time.Millisecond, nil
	}, runtime.WithRegisterer(reg))
	if err != nil {
		t.Fatalf("timeout 50ms below overall_timeout 300ms refused: %v", err)
	}
	for range 3 {
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if _, err := getStockOf(context.Background(), c); err != nil && !errors.Is(err, runtime.ErrAttemptTimeout) && !errors.Is(err, runtime.ErrConcurrencyLimited) {
					t.Errorf("call on a hung server: %v, want its attempt's timeout or a refusal", err)
				}
			})
		}
		wg.Wait()
	}
	if l := gaugeValue(t, reg, "resilient_client_adaptive_limit"); l > 4 {
		t.Errorf("limit %v after three bursts of 16 calls on a hung server with timeout 50ms below overall_timeout 300ms, want it halved per burst (at most 4)", l)
	}
}
