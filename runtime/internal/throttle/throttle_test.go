package throttle

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/internal/window"
)

var base = time.Unix(1_000_000, 0)

func mustNew(t testing.TB, p Policy, random func() float64) *Throttler {
	t.Helper()
	th, err := New(p, base, random)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// seeded returns a deterministic uniform source.
func seeded(seed uint64) func() float64 {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)).Float64
}

func TestZeroPolicyTakesTheDefaults(t *testing.T) {
	th := mustNew(t, Policy{}, nil)
	if got := th.Policy(); got != Defaults {
		t.Errorf("Policy() = %+v, want %+v", got, Defaults)
	}
	if Defaults != (Policy{K: 2, Window: 5 * time.Second, MaxRefusal: 0.9}) {
		t.Errorf("Defaults = %+v changed: update the package doc and the report of recovery times", Defaults)
	}
}

func TestNewRefusesBadPolicies(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{K: 0.5}, "throttle: k must be a finite number of at least 1, got 0.5"},
		{Policy{K: math.NaN()}, "throttle: k must be a finite number of at least 1, got NaN"},
		{Policy{K: math.Inf(1)}, "throttle: k must be a finite number of at least 1, got +Inf"},
		{Policy{Window: -time.Second}, "throttle: window must be at least 10ns, got -1s"},
		{Policy{Window: 5}, "throttle: window must be at least 10ns, got 5ns"},
		{Policy{MaxRefusal: 1}, "throttle: max_refusal must be in (0, 1), got 1:"},
		{Policy{MaxRefusal: -0.1}, "throttle: max_refusal must be in (0, 1), got -0.1"},
		{Policy{MaxRefusal: math.NaN()}, "throttle: max_refusal must be in (0, 1), got NaN"},
	} {
		th, err := New(c.p, base, nil)
		if err == nil || th != nil {
			t.Errorf("New(%+v) = %v, %v; want an error", c.p, th, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) error %q does not contain %q", c.p, err, c.want)
		}
	}
}

func TestNothingRefusedWhileTheDependencyAccepts(t *testing.T) {
	th := mustNew(t, Policy{}, func() float64 {
		t.Fatal("random drawn while the refusal probability is 0")
		return 0
	})
	now := base
	for range 5000 {
		if !th.Allow(now) {
			t.Fatal("refused while every request is accepted")
		}
		th.Record(now, true)
		now = now.Add(10 * time.Millisecond)
	}
	// The window (5 s) holds the last 500 requests, all accepted. 500
	// refused ones make exactly one accept in two: with K = 2,
	// requests − 2·accepts = 0 and still none is refused; one more and
	// some are.
	last := now.Add(-10 * time.Millisecond)
	for range 500 {
		th.Record(last, false)
	}
	if p := th.RefusalProbability(last); p != 0 {
		t.Errorf("refusal probability with one accept in two = %v, want 0", p)
	}
	th.Record(last, false)
	if p, want := th.RefusalProbability(last), 1.0/1002; p != want {
		t.Errorf("refusal probability with 500 accepts in 1001 = %v, want %v", p, want)
	}
}

func TestProbabilityFollowsTheFormula(t *testing.T) {
	th := mustNew(t, Policy{MaxRefusal: 0.99}, nil)
	for range 30 {
		th.Record(base, false)
	}
	for range 10 {
		th.Record(base, true)
	}
	// 40 requests, 10 accepts: (40 − 20) / 41.
	if p, want := th.RefusalProbability(base), 20.0/41; p != want {
		t.Errorf("refusal probability = %v, want %v", p, want)
	}
	for range 5000 { // (5040 − 20) / 5041 > 0.99
		th.Record(base, false)
	}
	if p := th.RefusalProbability(base); p != 0.99 {
		t.Errorf("refusal probability = %v, want the cap 0.99", p)
	}
}

func TestLocalRefusalsCountAsRequests(t *testing.T) {
	th := mustNew(t, Policy{}, func() float64 { return 0 }) // refuse whenever p > 0
	th.Record(base, false)                                  // 1 request, 0 accepts: p = 1/2
	if th.Allow(base) {
		t.Fatal("allowed with p = 1/2 and a draw of 0")
	}
	// The refusal is a request: 2 requests, p = 2/3.
	if p, want := th.RefusalProbability(base), 2.0/3; p != want {
		t.Errorf("refusal probability after a local refusal = %v, want %v", p, want)
	}
	// A draw at or above p passes, and a passing request is not counted
	// until it is recorded.
	th2 := mustNew(t, Policy{}, func() float64 { return 0.5 })
	th2.Record(base, false)
	if !th2.Allow(base) {
		t.Fatal("refused with a draw of 0.5 against p = 1/2")
	}
	if p := th2.RefusalProbability(base); p != 0.5 {
		t.Errorf("an allowed request was counted before Record: p = %v, want 0.5", p)
	}
}

// load drives th at rate requests per second from start for d, with every
// allowed request answered at once as accept says. It returns how many
// reached the dependency and the time of the first accepted one.
func load(th *Throttler, start time.Time, d time.Duration, perSecond int, accept bool) (reached int, first time.Duration) {
	step := time.Second / time.Duration(perSecond)
	first = -1
	for at := time.Duration(0); at < d; at += step {
		now := start.Add(at)
		if th.Allow(now) {
			reached++
			th.Record(now, accept)
			if accept && first < 0 {
				first = at
			}
		}
	}
	return reached, first
}

func TestTotalOutageRefusesUpToTheCap(t *testing.T) {
	th := mustNew(t, Policy{}, seeded(1))
	// 100 requests/s, none accepted, for three windows.
	reached, _ := load(th, base, 30*time.Second, 100, false)
	now := base.Add(30 * time.Second)
	if p := th.RefusalProbability(now); p != Defaults.MaxRefusal {
		t.Errorf("refusal probability after 30 s of outage = %v, want the cap %v", p, Defaults.MaxRefusal)
	}
	// After the first tenth of a second (p = R/(R+1) passes 0.9 at the tenth
	// failed request) nine in ten of the demand is refused: of 3000
	// requests, about 10 + 0.1 × 2990 reach the dependency.
	if reached < 250 || reached > 370 {
		t.Errorf("%d of 3000 requests reached a dead dependency, want about 310", reached)
	}
	// The last window: about a tenth reach it.
	reached, _ = load(th, now, 10*time.Second, 100, false)
	if reached < 70 || reached > 130 {
		t.Errorf("%d of 1000 requests reached a dead dependency in steady outage, want about 100", reached)
	}
}

// After a total outage, at 100 requests/s with the defaults, the first
// accept comes within a few tenths of a second (at 10 % of 100 requests/s,
// 0.1 s on average), and the refusals fade out over about two windows: the
// window must first forget the outage, then hold more than one accept in K
// requests, the local refusals of the recovery counting against it.
func TestRecoveryTimeAt100PerSecond(t *testing.T) {
	for seed := range uint64(20) {
		th := mustNew(t, Policy{}, seeded(seed))
		load(th, base, 30*time.Second, 100, false)
		start := base.Add(30 * time.Second)
		// Recovered: walk 100 ms at a time and note when p first falls under
		// 10 % and reaches 0.
		var first, below50, zero time.Duration = -1, -1, -1
		for at := time.Duration(0); at < 30*time.Second && zero < 0; at += 100 * time.Millisecond {
			_, f := load(th, start.Add(at), 100*time.Millisecond, 100, true)
			if first < 0 && f >= 0 {
				first = at + f
			}
			p := th.RefusalProbability(start.Add(at + 100*time.Millisecond))
			if below50 < 0 && p < 0.5 {
				below50 = at + 100*time.Millisecond
			}
			if p == 0 {
				zero = at + 100*time.Millisecond
			}
		}
		if seed == 0 {
			t.Logf("after recovery: first accept %v, refusals under 50%% at %v, none at %v", first, below50, zero)
		}
		// P(no accept in 50 requests) = 0.9^50 ≈ 0.5 %.
		if first < 0 || first > 500*time.Millisecond {
			t.Errorf("seed %d: first accept after %v, want within 0.5 s", seed, first)
		}
		if below50 < 5*time.Second || below50 > 10*time.Second || zero < 7*time.Second || zero > 12*time.Second {
			t.Errorf("seed %d: refusals under 50 %% %v and none %v after recovery, want 5 s to 10 s and 7 s to 12 s (about two windows)",
				seed, below50, zero)
		}
	}
}

func TestAQuietWindowForgetsTheOutage(t *testing.T) {
	th := mustNew(t, Policy{}, seeded(2))
	load(th, base, 20*time.Second, 100, false)
	if p := th.RefusalProbability(base.Add(20 * time.Second)); p == 0 {
		t.Fatal("no refusals after an outage")
	}
	if p := th.RefusalProbability(base.Add(25 * time.Second)); p != 0 {
		t.Errorf("refusal probability a whole window after the last request = %v, want 0", p)
	}
}

func TestConcurrentAllowAndRecord(t *testing.T) {
	th := mustNew(t, Policy{}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for i := range 2000 {
				now := base.Add(time.Duration(i) * time.Millisecond)
				if th.Allow(now) {
					th.Record(now, g%2 == 0 && i%3 == 0)
				} else {
					n++
				}
			}
			mu.Lock()
			refused += n
			mu.Unlock()
		})
	}
	wg.Wait()
	requests, accepts := th.w.Sum(int64(1999 * time.Millisecond))
	if requests == 0 || accepts > requests || refused == 0 {
		t.Errorf("requests %d, accepts %d, refused %d: a sixth accepted must cause refusals", requests, accepts, refused)
	}
}

// TestShortestWindow: the shortest window the shared check lets through
// (contract.MinAdaptiveWindow) is one nanosecond per bucket, and a
// throttler takes it; a nanosecond less is refused.
func TestShortestWindow(t *testing.T) {
	if got := time.Duration(window.Buckets); got != contract.MinAdaptiveWindow {
		t.Fatalf("the window has %d buckets, contract.MinAdaptiveWindow is %v: the check's words (ten buckets) no longer hold", window.Buckets, contract.MinAdaptiveWindow)
	}
	mustNew(t, Policy{Window: contract.MinAdaptiveWindow}, nil)
	if _, err := New(Policy{Window: contract.MinAdaptiveWindow - 1}, base, nil); err == nil {
		t.Error("a window below one nanosecond per bucket was taken")
	}
}
