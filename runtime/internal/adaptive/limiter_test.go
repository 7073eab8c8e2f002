package adaptive

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
)

var base = time.Unix(1_000_000, 0)

const ms = time.Millisecond

func mustNew(t testing.TB, p Policy) *Limiter {
	t.Helper()
	l, err := New(p, base)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func acquireN(t *testing.T, l *Limiter, n int) []Token {
	t.Helper()
	toks := make([]Token, n)
	for i := range toks {
		tok, ok := l.Acquire()
		if !ok {
			t.Fatalf("Acquire %d of %d refused at limit %d with %d in flight", i+1, n, l.Limit(), l.InFlight())
		}
		toks[i] = tok
	}
	return toks
}

func TestZeroPolicyTakesTheDefaults(t *testing.T) {
	l := mustNew(t, Policy{})
	if got := l.Policy(); got != Defaults {
		t.Errorf("Policy() = %+v, want %+v", got, Defaults)
	}
	if l.Limit() != 20 || l.InFlight() != 0 {
		t.Errorf("Limit %d, InFlight %d; want 20, 0", l.Limit(), l.InFlight())
	}
	// A low MaxLimit pulls the default initial limit down with it; a high
	// MinLimit pushes it up.
	if p := mustNew(t, Policy{MaxLimit: 5}).Policy(); p.InitialLimit != 5 {
		t.Errorf("initial limit under a max of 5 = %d, want 5", p.InitialLimit)
	}
	if p := mustNew(t, Policy{MinLimit: 30}).Policy(); p.InitialLimit != 30 {
		t.Errorf("initial limit over a min of 30 = %d, want 30", p.InitialLimit)
	}
}

func TestNewRefusesBadPolicies(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{MinLimit: -1}, "adaptive: min_limit must be at least 1, got -1"},
		{Policy{MinLimit: 10, MaxLimit: 5}, "adaptive: min_limit 10 is above max_limit 5: lower min_limit or raise max_limit"},
		{Policy{MaxLimit: MaxLimit + 1}, "adaptive: max_limit must be at most 1048576, got 1048577"},
		{Policy{InitialLimit: 200}, "adaptive: initial_limit 200 is not between min_limit 1 and max_limit 100"},
		{Policy{InitialLimit: -3}, "adaptive: initial_limit must be at least 1, got -3"},
		{Policy{Tolerance: 0.9}, "adaptive: tolerance must be a finite number of at least 1, got 0.9"},
		{Policy{Tolerance: math.NaN()}, "adaptive: tolerance must be a finite number of at least 1, got NaN"},
		{Policy{Tolerance: math.Inf(1)}, "adaptive: tolerance must be a finite number of at least 1, got +Inf"},
		{Policy{Smoothing: 1.5}, "adaptive: smoothing must be in (0, 1], got 1.5"},
		{Policy{Smoothing: -0.5}, "adaptive: smoothing must be in (0, 1], got -0.5"},
		{Policy{BaselineWindow: -time.Second}, "adaptive: baseline_window must be at least 10ns, got -1s"},
		{Policy{BaselineWindow: 3}, "adaptive: baseline_window must be at least 10ns, got 3ns"},
	} {
		l, err := New(c.p, base)
		if err == nil || l != nil {
			t.Errorf("New(%+v) = %v, %v; want an error", c.p, l, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) error %q does not contain %q", c.p, err, c.want)
		}
	}
}

func TestWithCeilingCapsByTheBulkhead(t *testing.T) {
	for _, c := range []struct {
		p                Policy
		permits          int
		max, initial     int
		wantErrorContain string
	}{
		{Policy{}, 8, 8, 8, ""},
		{Policy{}, 500, 100, 20, ""},
		{Policy{MaxLimit: 50}, 8, 8, 8, ""},
		{Policy{MaxLimit: 50}, 0, 50, 20, ""}, // no bulkhead
		{Policy{InitialLimit: 20}, 8, 0, 0, "initial_limit 20 is not between min_limit 1 and max_limit 8"},
		{Policy{MinLimit: 10}, 8, 0, 0, "min_limit 10 is above max_limit 8"},
	} {
		l, err := New(c.p.WithCeiling(c.permits), base)
		if c.wantErrorContain != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrorContain) {
				t.Errorf("%+v under %d permits: error %v, want one containing %q", c.p, c.permits, err, c.wantErrorContain)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v under %d permits: %v", c.p, c.permits, err)
			continue
		}
		if got := l.Policy(); got.MaxLimit != c.max || got.InitialLimit != c.initial {
			t.Errorf("%+v under %d permits: max %d, initial %d; want %d, %d", c.p, c.permits, got.MaxLimit, got.InitialLimit, c.max, c.initial)
		}
	}
}

func TestAcquireRefusesAtTheLimitAndReleaseFrees(t *testing.T) {
	l := mustNew(t, Policy{InitialLimit: 3})
	toks := acquireN(t, l, 3)
	if _, ok := l.Acquire(); ok {
		t.Fatal("a fourth call admitted under a limit of 3")
	}
	l.Release(toks[0], Ignored, 0, base)
	if l.InFlight() != 2 || l.Limit() != 3 {
		t.Errorf("after an Ignored release: InFlight %d, Limit %d; want 2, 3", l.InFlight(), l.Limit())
	}
	if _, ok := l.Acquire(); !ok {
		t.Error("refused with a permit free")
	}
	// The zero token (a refused Acquire's) is released as nothing.
	l.Release(Token{}, Dropped, time.Second, base)
	if l.InFlight() != 3 || l.Limit() != 3 {
		t.Errorf("after releasing the zero token: InFlight %d, Limit %d; want 3, 3", l.InFlight(), l.Limit())
	}
}

func TestSamplesWithoutInformationOnlyFreeThePermit(t *testing.T) {
	l := mustNew(t, Policy{InitialLimit: 4})
	toks := acquireN(t, l, 4)
	l.Release(toks[0], Success, 0, base)            // no RTT
	l.Release(toks[1], Success, -time.Second, base) // a clock that went back
	l.Release(toks[2], Outcome(7), time.Second, base)
	if l.InFlight() != 1 || l.Limit() != 4 || l.round.Load() != 0 {
		t.Errorf("InFlight %d, Limit %d, round %d; want 1, 4, 0: no sample may move the limit", l.InFlight(), l.Limit(), l.round.Load())
	}
}

func TestDropsHalveOncePerRoundTrip(t *testing.T) {
	l := mustNew(t, Policy{})
	toks := acquireN(t, l, 20)
	// A burst of 20 timeouts of calls admitted together: one halving.
	for _, tok := range toks {
		l.Release(tok, Dropped, 300*ms, base.Add(300*ms))
	}
	if l.Limit() != 10 {
		t.Fatalf("limit after one burst of timeouts = %d, want 10", l.Limit())
	}
	// The next round trip's calls time out too: halve again, and the drop of
	// a call from before the last halving does not.
	old := acquireN(t, l, 10)
	l.Release(old[0], Dropped, 300*ms, base.Add(600*ms))
	if l.Limit() != 5 {
		t.Fatalf("limit after the second round of timeouts = %d, want 5", l.Limit())
	}
	for _, tok := range old[1:] {
		l.Release(tok, Dropped, 300*ms, base.Add(600*ms))
	}
	if l.Limit() != 5 {
		t.Fatalf("limit after late drops of the previous round = %d, want 5", l.Limit())
	}
	// 5 → 2.5 → 1.25 → 1: at the minimum after two more round trips, and it
	// stays there.
	for range 4 {
		tok := acquireN(t, l, 1)[0]
		l.Release(tok, Dropped, 300*ms, base.Add(time.Second))
	}
	if l.Limit() != 1 || l.value != 1 {
		t.Errorf("limit = %d (%v), want the minimum 1", l.Limit(), l.value)
	}
	if _, ok := l.Acquire(); !ok {
		t.Error("the minimum limit admits no call")
	}
}

// round admits n calls in one round and ends the round with the first of
// them, a success of rtt at now; the others are released as Ignored, so that
// the round has that one sample and saw n calls in flight. It returns the
// limit after.
func round(t *testing.T, l *Limiter, n int, rtt time.Duration, now time.Time) float64 {
	t.Helper()
	toks := acquireN(t, l, n)
	r := l.round.Load()
	l.Release(toks[0], Success, rtt, now)
	if l.round.Load() != r+1 {
		t.Fatalf("the first return of a round's own call did not end the round")
	}
	for _, tok := range toks[1:] {
		l.Release(tok, Ignored, 0, now)
	}
	return l.value
}

func TestLatencyWithinToleranceGrowsTheLimit(t *testing.T) {
	l := mustNew(t, Policy{})
	// The first round sets the baseline, 40 ms, and grows: 20 + 0.5·√20.
	if got, want := round(t, l, 20, 40*ms, base.Add(time.Second)), 20+0.5*math.Sqrt(20); got != want {
		t.Fatalf("limit after a fast round = %v, want %v", got, want)
	}
	// 1.5 × the baseline is still within tolerance.
	v := l.value
	if got, want := round(t, l, 20, 60*ms, base.Add(2*time.Second)), v+0.5*math.Sqrt(v); got != want {
		t.Errorf("limit after a round at the tolerance = %v, want %v", got, want)
	}
	// Growth stops at the max limit.
	for i := range 100 {
		round(t, l, l.Limit(), 40*ms, base.Add(3*time.Second+time.Duration(i)*ms))
	}
	if l.Limit() != 100 || l.value != 100 {
		t.Errorf("limit after 100 fast rounds = %d (%v), want the max 100", l.Limit(), l.value)
	}
}

func TestAnIdleClientsLimitDoesNotGrow(t *testing.T) {
	l := mustNew(t, Policy{})
	// Rounds of 9 calls in flight use less than half of a limit of 20.
	for i := range 10 {
		round(t, l, 9, 40*ms, base.Add(time.Duration(i)*100*ms))
	}
	if l.value != 20 {
		t.Errorf("limit after rounds using 9 of 20 = %v, want 20", l.value)
	}
	// 10 in flight is half: it grows.
	round(t, l, 10, 40*ms, base.Add(2*time.Second))
	if l.value <= 20 {
		t.Errorf("limit after a round using 10 of 20 = %v, want more than 20", l.value)
	}
}

func TestLatencyBeyondToleranceShrinksTheLimit(t *testing.T) {
	l := mustNew(t, Policy{InitialLimit: 40})
	round(t, l, 40, 40*ms, base) // baseline 40 ms
	v := l.value
	// 90 ms against 1.5 × 40 = 60: the target is v × 60/90, half of the way.
	if got, want := round(t, l, int(v), 90*ms, base.Add(time.Second)), v+0.5*(v*60/90-v); got != want {
		t.Fatalf("limit after a round at 90 ms = %v, want %v", got, want)
	}
	// Far slower: the target is never below half, so one round takes at
	// most a quarter off.
	v = l.value
	if got, want := round(t, l, int(v), 4*time.Second, base.Add(2*time.Second)), v*0.75; got != want {
		t.Errorf("limit after a round at 4 s = %v, want %v", got, want)
	}
}

// A round's RTT is the median of the successes returned during it, those
// of calls admitted in earlier rounds included: a tail does not move it, a
// queue that slows half of them does.
func TestTheMedianOfTheRoundIsItsRTT(t *testing.T) {
	for _, c := range []struct {
		rtts []time.Duration // of three earlier calls, then of the round's own
		grow bool
	}{
		{[]time.Duration{40 * ms, 40 * ms, 40 * ms, time.Second}, true}, // median 40 ms: a tail
		{[]time.Duration{40 * ms, 40 * ms, 80 * ms, 80 * ms}, true},     // (40 + 80) / 2 = 60 ms: at the tolerance
		{[]time.Duration{40 * ms, 200 * ms, 40 * ms, 200 * ms}, false},  // 120 ms: beyond it
	} {
		l := mustNew(t, Policy{InitialLimit: 4})
		round(t, l, 4, 40*ms, base) // baseline 40 ms
		old := acquireN(t, l, 4)
		l.Release(old[0], Success, 40*ms, base.Add(time.Second)) // ends that round
		v := l.value
		own := acquireN(t, l, 1)[0]
		for i, tok := range old[1:] {
			l.Release(tok, Success, c.rtts[i], base.Add(time.Second))
		}
		if l.value != v {
			t.Fatalf("returns of an earlier round's calls ended the round: %v → %v", v, l.value)
		}
		l.Release(own, Success, c.rtts[3], base.Add(time.Second))
		if grew := l.value > v; grew != c.grow {
			t.Errorf("samples %v: limit %v → %v, want growth %v", c.rtts, v, l.value, c.grow)
		}
	}
}

// The median is of a round's first roundSamples successes: the later ones
// count for the round's weight only.
func TestTheRoundsMedianIsOfItsFirstSuccesses(t *testing.T) {
	l := mustNew(t, Policy{InitialLimit: 100, MaxLimit: 200})
	round(t, l, 100, 40*ms, base) // baseline 40 ms
	old := acquireN(t, l, 100)
	l.Release(old[0], Success, 40*ms, base.Add(time.Second)) // ends that round
	v := l.value
	own := acquireN(t, l, 1)[0]
	for i, tok := range old[1:] {
		rtt := 40 * ms
		if i >= roundSamples {
			rtt = time.Second // 67 of 100: the mean and the true median are far beyond the tolerance
		}
		l.Release(tok, Success, rtt, base.Add(time.Second))
	}
	l.Release(own, Success, time.Second, base.Add(time.Second))
	if l.value <= v {
		t.Errorf("limit %v → %v: want growth, the first %d successes being at the baseline", v, l.value, roundSamples)
	}
}

// TestTheBaselineForgetsAWindowWithoutRounds: the anchor (40 ms) holds
// while the window holds rounds, 100 ms rounds still shrink the limit 25 s
// later; after a spell without any longer than the window it is
// forgotten, and the same 100 ms is then the baseline the limit grows at.
// (Before stop 30 the anchor left with its bucket, 30 s after it was set,
// rounds or not: a queue that followed a quiet spell, or lasted longer than
// the window, became its own baseline.)
func TestTheBaselineForgetsAWindowWithoutRounds(t *testing.T) {
	l := mustNew(t, Policy{InitialLimit: 40})
	round(t, l, 40, 40*ms, base)
	// 100 ms is 2.5 × the baseline: shrinks while 40 ms is remembered…
	for _, at := range []time.Duration{10 * time.Second, 20 * time.Second, 35 * time.Second} {
		v := l.value
		round(t, l, int(v), 100*ms, base.Add(at))
		if l.value >= v && v > float64(l.p.MinLimit) {
			t.Fatalf("at %v, with rounds in the window since the anchor: the limit did not shrink at 2.5 × the baseline: %v → %v", at, v, l.value)
		}
	}
	// …and after 31 s without a round the window is empty: the next
	// round is its anchor, and the same latency grows the limit.
	round(t, l, int(l.value), 100*ms, base.Add(66*time.Second))
	v := l.value
	round(t, l, int(v), 100*ms, base.Add(67*time.Second))
	if l.value <= v {
		t.Errorf("limit did not grow once the baseline forgot 40 ms: %v → %v", v, l.value)
	}
}

func TestConcurrentAcquireRelease(t *testing.T) {
	l := mustNew(t, Policy{MaxLimit: 16, InitialLimit: 8})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, over := 0, 0
	for g := range 8 {
		wg.Go(func() {
			a, o := 0, 0
			for i := range 3000 {
				tok, ok := l.Acquire()
				if !ok {
					continue
				}
				a++
				if l.InFlight() > 16 {
					o++
				}
				outcome := Success
				if (g+i)%17 == 0 {
					outcome = Dropped
				}
				l.Release(tok, outcome, time.Duration(1+i%50)*ms, base.Add(time.Duration(i)*ms))
			}
			mu.Lock()
			admitted += a
			over += o
			mu.Unlock()
		})
	}
	wg.Wait()
	if l.InFlight() != 0 || admitted == 0 || over != 0 {
		t.Errorf("InFlight %d after all released, %d admitted, %d over the max limit", l.InFlight(), admitted, over)
	}
	if lim := l.Limit(); lim < 1 || lim > 16 {
		t.Errorf("limit %d outside [1, 16]", lim)
	}
}

// TestShortestBaselineWindow: the shortest baseline window the shared
// check lets through (contract.MinAdaptiveWindow) is one nanosecond per
// bucket, and a limiter takes it; a nanosecond less is refused.
func TestShortestBaselineWindow(t *testing.T) {
	if got := time.Duration(baselineBuckets); got != contract.MinAdaptiveWindow {
		t.Fatalf("the baseline has %d buckets, contract.MinAdaptiveWindow is %v: the check's words (ten buckets) no longer hold", baselineBuckets, contract.MinAdaptiveWindow)
	}
	mustNew(t, Policy{BaselineWindow: contract.MinAdaptiveWindow})
	if _, err := New(Policy{BaselineWindow: contract.MinAdaptiveWindow - 1}, base); err == nil {
		t.Error("a baseline window below one nanosecond per bucket was taken")
	}
}

// A class outside [0, MaxClasses) is class 0: its successes are judged
// against class 0's baseline, and no class is added for it.
func TestAClassOutOfRangeIsClassZero(t *testing.T) {
	for _, cls := range []int{-1, MaxClasses, math.MaxInt} {
		l := mustNew(t, Policy{InitialLimit: 20})
		round(t, l, 20, 10*ms, base) // class 0's baseline: 10 ms
		v := l.value
		toks := acquireN(t, l, int(v))
		// 100 ms is ten times class 0's baseline, but the first sample of a
		// class of its own: as class 0 the limit shrinks, as its own it grows.
		l.ReleaseAs(toks[0], Success, cls, 100*ms, int64(time.Second))
		for _, tok := range toks[1:] {
			l.ReleaseAs(tok, Ignored, cls, 0, int64(time.Second))
		}
		if l.value >= v {
			t.Errorf("class %d at 10× class 0's baseline: limit %v → %v, want it to shrink", cls, v, l.value)
		}
		if len(l.classes) != 1 || len(l.touched) != 0 {
			t.Errorf("class %d: %d classes, touched %v; want class 0 alone", cls, len(l.classes), l.touched)
		}
	}
}
