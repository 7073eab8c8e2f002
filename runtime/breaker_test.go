package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// allowAt, doneAt and stateAtTime drive a breaker with instants instead of
// clock readings, for the tests.
func (b *breaker) allowAt(now time.Time) (ticket, time.Duration, bool) {
	return b.allow(func() int64 { return nanos(now, b.base) }, true)
}

func (b *breaker) doneAt(t ticket, o outcome, latency time.Duration, now time.Time) {
	b.done(t, o, latency, nanos(now, b.base))
}

func (b *breaker) stateAtTime(now time.Time) State { return b.stateAt(nanos(now, b.base)) }

func testBreakerPolicy() policy.Breaker {
	return policy.Breaker{
		FailureRatio:   0.5,
		MinimumCalls:   10,
		Window:         10 * time.Second,
		CoolDown:       5 * time.Second,
		HalfOpenProbes: 3,
		FailureCodes:   policy.CodesOf(codes.Unavailable),
	}
}

type transitions struct {
	mu   sync.Mutex
	list []string
}

func (r *transitions) record(from, to State) {
	r.mu.Lock()
	r.list = append(r.list, from.String()+"->"+to.String())
	r.mu.Unlock()
}

func (r *transitions) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

func newTestBreaker(p policy.Breaker) (*breaker, *transitions) {
	tr := &transitions{}
	return newBreaker(p, t0, tr.record), tr
}

// call makes one call at now with outcome o and fails the test if the
// breaker refuses it.
func call(t *testing.T, b *breaker, now time.Time, o outcome) {
	t.Helper()
	tk, _, ok := b.allowAt(now)
	if !ok {
		t.Fatalf("call at %s refused, state %s", now.Sub(t0), b.stateAtTime(now))
	}
	b.doneAt(tk, o, 0, now)
}

func wantState(t *testing.T, b *breaker, now time.Time, want State) {
	t.Helper()
	if got := b.stateAtTime(now); got != want {
		t.Fatalf("state at %s = %s, want %s", now.Sub(t0), got, want)
	}
}

func wantTransitions(t *testing.T, tr *transitions, want ...string) {
	t.Helper()
	if got := tr.get(); !slices.Equal(got, want) {
		t.Fatalf("transitions = %q, want %q", got, want)
	}
}

// openBreaker trips a closed breaker at now with MinimumCalls failures.
func openBreaker(t *testing.T, b *breaker, now time.Time) {
	t.Helper()
	for range b.p.MinimumCalls {
		call(t, b, now, outcomeFailure)
	}
	wantState(t, b, now, StateOpen)
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{StateClosed: "closed", StateHalfOpen: "half-open", StateOpen: "open", 7: "unknown"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", s, got, want)
		}
	}
}

func TestBreakerStaysClosedBelowMinimumCalls(t *testing.T) {
	b, tr := newTestBreaker(testBreakerPolicy())
	now := t0.Add(time.Second)
	for range 9 {
		call(t, b, now, outcomeFailure)
	}
	wantState(t, b, now, StateClosed)
	wantTransitions(t, tr)
	call(t, b, now, outcomeFailure) // the 10th call: 10/10 failed
	wantState(t, b, now, StateOpen)
	wantTransitions(t, tr, "closed->open")
}

func TestBreakerOpensExactlyAtFailureRatio(t *testing.T) {
	for _, tc := range []struct{ num, den int }{{1, 10}, {1, 4}, {1, 3}, {1, 2}, {2, 3}, {9, 10}, {1, 1}} {
		ratio := float64(tc.num) / float64(tc.den)
		t.Run(fmt.Sprint(ratio), func(t *testing.T) {
			p := testBreakerPolicy()
			p.FailureRatio = ratio
			b, tr := newTestBreaker(p)
			now := t0.Add(time.Second)
			successes := 20
			if tc.num == tc.den {
				successes = 0 // with any success the ratio stays below 1
			}
			for range successes {
				call(t, b, now, outcomeSuccess)
			}
			// Opens at the first failure count f where f/(20+f) ≥ num/den.
			for f := 1; ; f++ {
				call(t, b, now, outcomeFailure)
				shouldOpen := successes+f >= p.MinimumCalls && f*tc.den >= tc.num*(successes+f)
				if got := b.stateAtTime(now) == StateOpen; got != shouldOpen {
					t.Fatalf("after %d successes and %d failures open=%v, want %v", successes, f, got, shouldOpen)
				}
				if shouldOpen {
					break
				}
			}
			wantTransitions(t, tr, "closed->open")
		})
	}
}

func TestBreakerSuccessReachingMinimumCallsOpens(t *testing.T) {
	// 9 failures are not yet judged; the 10th call, a success, brings the
	// window to MinimumCalls with 90 % failures: the breaker opens.
	b, tr := newTestBreaker(testBreakerPolicy())
	now := t0.Add(time.Second)
	for range 9 {
		call(t, b, now, outcomeFailure)
	}
	call(t, b, now, outcomeSuccess)
	wantState(t, b, now, StateOpen)
	wantTransitions(t, tr, "closed->open")
}

func TestBreakerAnswersAndIgnoredCalls(t *testing.T) {
	b, _ := newTestBreaker(testBreakerPolicy())
	now := t0.Add(time.Second)
	for range 100 {
		call(t, b, now, outcomeIgnored) // neither calls nor failures
	}
	for range 5 {
		call(t, b, now, outcomeSuccess)
	}
	for range 4 {
		call(t, b, now, outcomeFailure)
	}
	wantState(t, b, now, StateClosed) // 4/9 and below MinimumCalls
	if calls, failures := b.outcomes.Sum(nanos(now, t0)); calls != 9 || failures != 4 {
		t.Fatalf("window = (%d calls, %d failures), want (9, 4)", calls, failures)
	}
}

func TestBreakerWindowSlides(t *testing.T) {
	t.Run("old burst expired", func(t *testing.T) {
		b, tr := newTestBreaker(testBreakerPolicy())
		burst := t0.Add(time.Second)
		for range 9 {
			call(t, b, burst, outcomeFailure)
		}
		later := burst.Add(11 * time.Second) // past the 10 s window
		call(t, b, later, outcomeFailure)
		wantState(t, b, later, StateClosed) // 1 call in the window
		wantTransitions(t, tr)
	})
	t.Run("burst within window", func(t *testing.T) {
		b, tr := newTestBreaker(testBreakerPolicy())
		burst := t0.Add(time.Second)
		for range 9 {
			call(t, b, burst, outcomeFailure)
		}
		later := burst.Add(5 * time.Second)
		call(t, b, later, outcomeFailure)
		wantState(t, b, later, StateOpen)
		wantTransitions(t, tr, "closed->open")
	})
}

func TestBreakerRefusesWhileOpen(t *testing.T) {
	p := testBreakerPolicy()
	b, _ := newTestBreaker(p)
	opened := t0.Add(time.Second)
	openBreaker(t, b, opened)
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Second, p.CoolDown - time.Nanosecond} {
		_, retryAfter, ok := b.allowAt(opened.Add(d))
		if ok {
			t.Fatalf("Allow %s after opening admitted a call", d)
		}
		if want := p.CoolDown - d; retryAfter != want {
			t.Errorf("RetryAfter %s after opening = %s, want %s", d, retryAfter, want)
		}
		wantState(t, b, opened.Add(d), StateOpen)
	}
}

func TestBreakerHalfOpenAdmitsExactlyProbes(t *testing.T) {
	p := testBreakerPolicy()
	b, tr := newTestBreaker(p)
	opened := t0.Add(time.Second)
	openBreaker(t, b, opened)
	probeTime := opened.Add(p.CoolDown)
	wantState(t, b, probeTime, StateHalfOpen) // before any Allow
	var tickets []ticket
	for range p.HalfOpenProbes {
		tk, _, ok := b.allowAt(probeTime)
		if !ok {
			t.Fatalf("probe %d refused", len(tickets)+1)
		}
		if !tk.probe {
			t.Fatalf("ticket %+v is not a probe", tk)
		}
		tickets = append(tickets, tk)
	}
	for range 5 {
		if _, retryAfter, ok := b.allowAt(probeTime); ok || retryAfter != 0 {
			t.Fatalf("Allow beyond the probes = (%s, %v), want refusal", retryAfter, ok)
		}
	}
	wantState(t, b, probeTime, StateHalfOpen)
	wantTransitions(t, tr, "closed->open", "open->half-open")

	// All probes succeed: closed, and the window starts afresh.
	for i, tk := range tickets {
		b.doneAt(tk, outcomeSuccess, time.Millisecond, probeTime)
		want := StateHalfOpen
		if i == len(tickets)-1 {
			want = StateClosed
		}
		wantState(t, b, probeTime, want)
	}
	wantTransitions(t, tr, "closed->open", "open->half-open", "half-open->closed")
	call(t, b, probeTime, outcomeFailure)
	wantState(t, b, probeTime, StateClosed)
}

func TestBreakerProbeFailureReopens(t *testing.T) {
	p := testBreakerPolicy()
	b, tr := newTestBreaker(p)
	opened := t0.Add(time.Second)
	openBreaker(t, b, opened)
	probeTime := opened.Add(p.CoolDown)
	var tickets []ticket
	for range p.HalfOpenProbes {
		tk, _, ok := b.allowAt(probeTime)
		if !ok {
			t.Fatal("probe refused")
		}
		tickets = append(tickets, tk)
	}
	b.doneAt(tickets[0], outcomeSuccess, 0, probeTime)
	failedAt := probeTime.Add(300 * time.Millisecond)
	b.doneAt(tickets[1], outcomeFailure, 0, failedAt)
	wantState(t, b, failedAt, StateOpen)
	// The remaining probe's success comes from the old generation: no effect.
	b.doneAt(tickets[2], outcomeSuccess, 0, failedAt)
	wantState(t, b, failedAt, StateOpen)
	wantTransitions(t, tr, "closed->open", "open->half-open", "half-open->open")

	// A fresh cool-down from the failure.
	_, retryAfter, ok := b.allowAt(failedAt.Add(time.Second))
	if ok || retryAfter != p.CoolDown-time.Second {
		t.Fatalf("Allow 1s after reopening = (%s, %v), want (%s, false)", retryAfter, ok, p.CoolDown-time.Second)
	}
	wantState(t, b, failedAt.Add(p.CoolDown-time.Nanosecond), StateOpen)
	wantState(t, b, failedAt.Add(p.CoolDown), StateHalfOpen)
	if _, _, ok := b.allowAt(failedAt.Add(p.CoolDown)); !ok {
		t.Fatal("probe after the second cool-down refused")
	}
}

func TestBreakerIgnoredProbeFreesItsPlace(t *testing.T) {
	p := testBreakerPolicy()
	b, tr := newTestBreaker(p)
	openBreaker(t, b, t0)
	now := t0.Add(p.CoolDown)
	var tickets []ticket
	for range p.HalfOpenProbes {
		tk, _, _ := b.allowAt(now)
		tickets = append(tickets, tk)
	}
	if _, _, ok := b.allowAt(now); ok {
		t.Fatal("a 4th probe was admitted")
	}
	b.doneAt(tickets[0], outcomeIgnored, 0, now)
	tk, _, ok := b.allowAt(now)
	if !ok || !tk.probe {
		t.Fatal("the place freed by an ignored probe was not given to a new probe")
	}
	if _, _, ok := b.allowAt(now); ok {
		t.Fatal("one ignored probe freed two places")
	}
	// An ignored probe is no success: the three others must still succeed.
	b.doneAt(tickets[1], outcomeSuccess, 0, now)
	b.doneAt(tickets[2], outcomeSuccess, 0, now)
	wantState(t, b, now, StateHalfOpen)
	b.doneAt(tk, outcomeSuccess, 0, now)
	wantState(t, b, now, StateClosed)
	wantTransitions(t, tr, "closed->open", "open->half-open", "half-open->closed")
}

func TestBreakerStaleTicketsNotCounted(t *testing.T) {
	t.Run("slow failure after re-close", func(t *testing.T) {
		p := testBreakerPolicy()
		p.MinimumCalls, p.HalfOpenProbes = 1, 1 // a single failure would open it
		b, tr := newTestBreaker(p)
		slow, _, ok := b.allowAt(t0) // a slow call, admitted while closed
		if !ok {
			t.Fatal("refused")
		}
		call(t, b, t0, outcomeFailure) // opens
		probeTime := t0.Add(p.CoolDown)
		call(t, b, probeTime, outcomeSuccess) // the probe closes it
		wantState(t, b, probeTime, StateClosed)
		// The slow call fails long after; it said nothing about the new state.
		b.doneAt(slow, outcomeFailure, 6*time.Second, probeTime.Add(time.Second))
		wantState(t, b, probeTime.Add(time.Second), StateClosed)
		if calls, _ := b.outcomes.Sum(nanos(probeTime.Add(time.Second), t0)); calls != 0 {
			t.Fatalf("stale outcome counted: %d calls in the window", calls)
		}
		wantTransitions(t, tr, "closed->open", "open->half-open", "half-open->closed")
	})
	t.Run("probe of an earlier half-open", func(t *testing.T) {
		p := testBreakerPolicy()
		p.HalfOpenProbes = 2
		b, tr := newTestBreaker(p)
		openBreaker(t, b, t0)
		first := t0.Add(p.CoolDown)
		stale, _, _ := b.allowAt(first)
		failing, _, _ := b.allowAt(first)
		b.doneAt(failing, outcomeFailure, 0, first) // reopens
		second := first.Add(p.CoolDown)
		probe, _, ok := b.allowAt(second)
		if !ok {
			t.Fatal("probe refused")
		}
		b.doneAt(stale, outcomeSuccess, 0, second) // must not count as one of the 2
		b.doneAt(probe, outcomeSuccess, 0, second)
		wantState(t, b, second, StateHalfOpen)
		if _, _, ok := b.allowAt(second); !ok {
			t.Fatal("second probe refused: the stale probe took its place")
		}
		wantTransitions(t, tr, "closed->open", "open->half-open", "half-open->open", "open->half-open")
	})
}

func TestBreakerSlowCalls(t *testing.T) {
	p := testBreakerPolicy()
	p.MinimumCalls, p.FailureRatio, p.HalfOpenProbes = 4, 0.5, 1
	p.SlowCallThreshold = 100 * time.Millisecond
	b, tr := newTestBreaker(p)
	now := t0.Add(time.Second)
	done := func(latency time.Duration, o outcome) {
		tk, _, ok := b.allowAt(now)
		if !ok {
			t.Fatal("refused")
		}
		b.doneAt(tk, o, latency, now)
	}
	done(100*time.Millisecond, outcomeSuccess) // at the threshold: a success
	done(time.Millisecond, outcomeSuccess)
	done(200*time.Millisecond, outcomeIgnored) // slow but ignored: still nothing
	done(101*time.Millisecond, outcomeSuccess) // slow: a failure
	wantState(t, b, now, StateClosed)          // 1/3 below MinimumCalls
	done(time.Second, outcomeSuccess)          // 2/4: opens
	wantState(t, b, now, StateOpen)

	// A slow probe is a failed probe.
	now = now.Add(p.CoolDown)
	done(time.Second, outcomeSuccess)
	wantState(t, b, now, StateOpen)
	now = now.Add(p.CoolDown)
	done(50*time.Millisecond, outcomeSuccess)
	wantState(t, b, now, StateClosed)
	wantTransitions(t, tr, "closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed")
}

func TestBreakerTransitionCalledOncePerTransition(t *testing.T) {
	p := testBreakerPolicy()
	p.MinimumCalls = 50
	p.HalfOpenProbes = 5
	var opened, halfOpened, closed, other atomic.Int32
	b := newBreaker(p, t0, func(from, to State) {
		switch {
		case from == StateClosed && to == StateOpen:
			opened.Add(1)
		case from == StateOpen && to == StateHalfOpen:
			halfOpened.Add(1)
		case from == StateHalfOpen && to == StateClosed:
			closed.Add(1)
		default:
			other.Add(1)
		}
	})
	now := t0.Add(time.Second)
	var wg sync.WaitGroup
	for range 32 { // many failures at once: one closed→open
		wg.Go(func() {
			for range 20 {
				if tk, _, ok := b.allowAt(now); ok {
					b.doneAt(tk, outcomeFailure, 0, now)
				}
			}
		})
	}
	wg.Wait()
	later := now.Add(p.CoolDown)
	var mu sync.Mutex
	var admitted []ticket
	for range 32 { // many calls after the cool-down: one open→half-open
		wg.Go(func() {
			for range 20 {
				if tk, _, ok := b.allowAt(later); ok {
					mu.Lock()
					admitted = append(admitted, tk)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(admitted) != p.HalfOpenProbes {
		t.Fatalf("%d probes admitted, want %d", len(admitted), p.HalfOpenProbes)
	}
	for _, tk := range admitted { // all succeed at once: one half-open→closed
		wg.Go(func() { b.doneAt(tk, outcomeSuccess, 0, later) })
	}
	wg.Wait()
	if opened.Load() != 1 || halfOpened.Load() != 1 || closed.Load() != 1 || other.Load() != 0 {
		t.Fatalf("transitions: closed->open %d, open->half-open %d, half-open->closed %d, other %d; want 1, 1, 1, 0",
			opened.Load(), halfOpened.Load(), closed.Load(), other.Load())
	}
}

// TestBreakerHalfOpenInvariant hammers a breaker whose fake clock moves so
// fast that it keeps cycling open → half-open → open/closed, and checks that
// no generation ever has more than HalfOpenProbes probes in flight.
func TestBreakerHalfOpenInvariant(t *testing.T) {
	p := policy.Breaker{
		FailureRatio:   0.3, // below the 3/8 failures of the calls below
		MinimumCalls:   4,
		Window:         10 * time.Millisecond,
		CoolDown:       time.Millisecond,
		HalfOpenProbes: 3,
		FailureCodes:   policy.CodesOf(codes.Unavailable),
	}
	var transitions atomic.Int64
	b := newBreaker(p, t0, func(from, to State) { transitions.Add(1) })
	var clock atomic.Int64 // fake nanoseconds since t0
	var mu sync.Mutex
	inFlight := map[uint64]int{} // generation → probes admitted and not done
	var probes, maxSeen atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 3000 {
				now := t0.Add(time.Duration(clock.Add(int64(r.IntN(20_000)))))
				tk, _, ok := b.allowAt(now)
				if !ok {
					continue
				}
				if tk.probe {
					probes.Add(1)
					mu.Lock()
					inFlight[tk.gen]++
					n := inFlight[tk.gen]
					mu.Unlock()
					if int64(n) > maxSeen.Load() {
						maxSeen.Store(int64(n)) // racy max is fine: only compared below
					}
					if n > p.HalfOpenProbes {
						t.Errorf("generation %d has %d probes in flight, more than %d", tk.gen, n, p.HalfOpenProbes)
					}
				}
				var o outcome
				switch x := r.IntN(10); {
				case x < 5:
					o = outcomeSuccess
				case x < 8:
					o = outcomeFailure
				default:
					o = outcomeIgnored
				}
				if tk.probe {
					mu.Lock()
					inFlight[tk.gen]-- // before Done, which may free the place
					mu.Unlock()
				}
				b.doneAt(tk, o, 0, t0.Add(time.Duration(clock.Load())))
			}
		})
	}
	wg.Wait()
	if probes.Load() == 0 || transitions.Load() < 10 {
		t.Fatalf("the test did not exercise half-open: %d probes, %d transitions", probes.Load(), transitions.Load())
	}
	t.Logf("%d probes, %d transitions, at most %d probes in flight", probes.Load(), transitions.Load(), maxSeen.Load())
}

func TestBreakerClosedDoesNotAllocate(t *testing.T) {
	p := testBreakerPolicy()
	p.SlowCallThreshold = time.Second
	b := newBreaker(p, time.Now(), nil)
	allocs := testing.AllocsPerRun(1000, func() {
		now := time.Now()
		tk, _, _ := b.allowAt(now)
		b.doneAt(tk, outcomeSuccess, time.Millisecond, now)
	})
	if allocs != 0 {
		t.Fatalf("Allow+Done on a closed breaker: %v allocations, want 0", allocs)
	}
}

// BenchmarkBreakerClosed measures Allow+Done on a closed breaker, reading
// the time as the runtime does: the monotonic clock only (base.Add of
// time.Since keeps the monotonic reading, at half the cost of time.Now).
func BenchmarkBreakerClosed(b *testing.B) {
	p := testBreakerPolicy()
	p.SlowCallThreshold = time.Second
	base := time.Now()
	br := newBreaker(p, base, nil)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			now := base.Add(time.Since(base))
			tk, _, ok := br.allowAt(now)
			if !ok {
				b.Fatal("refused")
			}
			br.doneAt(tk, outcomeSuccess, time.Millisecond, now)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				now := base.Add(time.Since(base))
				tk, _, ok := br.allowAt(now)
				if !ok {
					b.Fatal("refused")
				}
				br.doneAt(tk, outcomeSuccess, time.Millisecond, now)
			}
		})
	})
}

func BenchmarkBulkhead(b *testing.B) {
	ctx := b.Context()
	b.Run("serial", func(b *testing.B) {
		bh := newBulkhead(policy.Bulkhead{Permits: 1})
		b.ReportAllocs()
		for b.Loop() {
			if ok, _ := bh.acquire(ctx); !ok {
				b.Fatal("refused")
			}
			bh.release()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		bh := newBulkhead(policy.Bulkhead{Permits: 1 << 20})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _ := bh.acquire(ctx); !ok {
					b.Fatal("refused")
				}
				bh.release()
			}
		})
	})
}

func BenchmarkBudgetRequest(b *testing.B) {
	bu := newBudget(policy.DefaultBudget, time.Now())
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bu.requestAt(time.Now())
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.requestAt(time.Now())
			}
		})
	})
}

// TestBreakerWalkthrough takes one breaker through its states with the
// time as a parameter: a clock that starts at base, moved by hand.
func TestBreakerWalkthrough(t *testing.T) {
	var out strings.Builder
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBreaker(policy.Breaker{
		FailureRatio:   0.5,
		MinimumCalls:   4,
		Window:         10 * time.Second,
		CoolDown:       5 * time.Second,
		HalfOpenProbes: 1,
		FailureCodes:   policy.CodesOf(codes.Unavailable),
	}, base, func(from, to State) { fmt.Fprintf(&out, "  %s -> %s\n", from, to) })

	now := base.Add(time.Second)
	for _, o := range []outcome{outcomeSuccess, outcomeFailure, outcomeSuccess, outcomeFailure} {
		tk, _, _ := b.allowAt(now)
		b.doneAt(tk, o, 20*time.Millisecond, now)
	}
	fmt.Fprintln(&out, "after 2 failures in 4 calls:", b.stateAtTime(now))

	_, retryAfter, ok := b.allowAt(now.Add(2 * time.Second))
	fmt.Fprintln(&out, "allowed:", ok, "retry after:", retryAfter)

	now = now.Add(5 * time.Second)
	fmt.Fprintln(&out, "after the cool-down:", b.stateAtTime(now))
	probe, _, ok := b.allowAt(now)
	fmt.Fprintln(&out, "probe allowed:", ok)
	_, _, ok = b.allowAt(now)
	fmt.Fprintln(&out, "second call allowed:", ok)
	b.doneAt(probe, outcomeSuccess, 20*time.Millisecond, now)
	fmt.Fprintln(&out, "after the probe:", b.stateAtTime(now))
	const want = `  closed -> open
after 2 failures in 4 calls: open
allowed: false retry after: 3s
after the cool-down: half-open
  open -> half-open
probe allowed: true
second call allowed: false
  half-open -> closed
after the probe: closed
`
	if got := out.String(); got != want {
		t.Errorf("walkthrough printed\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkBreakerFixedTime is the breaker closed, one successful call
// admitted and recorded per operation, with the time given, not read: the
// cost of its own logic, without the clock's (bench/ compares it, through
// a unary handle, with gobreaker).
func BenchmarkBreakerFixedTime(b *testing.B) {
	br := newBreaker(policy.Breaker{
		FailureRatio:   0.5,
		MinimumCalls:   20,
		Window:         10 * time.Second,
		CoolDown:       2 * time.Second,
		HalfOpenProbes: 3,
		FailureCodes:   policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded),
	}, t0, nil)
	now := int64(time.Second)
	clock := func() int64 { return now }
	b.ReportAllocs()
	for b.Loop() {
		tk, _, ok := br.allow(clock, true)
		if !ok {
			b.Fatal("a closed breaker refused a call")
		}
		br.done(tk, outcomeSuccess, 0, now)
	}
}
