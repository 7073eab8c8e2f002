package runtime_test

// Attack 27i: the adaptive limit against a real loopback server that
// never queues but whose latency has a tail (README "Adaptive
// concurrency limit": "within tolerance × that baseline (1.5) the limit
// grows ...; beyond it the limit shrinks"; "With the bulkhead": "the
// limit refuses at once the attempts above what the dependency
// currently serves in time").

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk27iTail answers a call after fast, or, one call in five chosen at
// random (seeded), after slow, whatever else is in flight: a dependency
// that never queues, with a latency tail (a cache miss, a pause).
func atk27iTail(seed uint64, fast, slow time.Duration) server.Behaviour {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 27))
	return func(ctx context.Context, _ server.Call) error {
		mu.Lock()
		d := fast
		if r.Float64() < 0.2 {
			d = slow
		}
		mu.Unlock()
		return server.Wait(ctx, d)
	}
}

// TestAttack27ILatencyTailWithoutQueueingHoldsTheLimitLow: two servers
// answer GetStock in 10 ms, one call in five in 40 ms, whatever is in
// flight: they never queue, and serve 16 callers at once as well as one.
// Two clients of the same policy (16 permits, 1 s attempts, no breaker,
// no retries), one with the default adaptive limit (tolerance 1.5) under
// the permits, 16 callers each for 600 ms side by side; a third client,
// with the limit, against a server that answers every call in 16 ms (the
// same mean, no tail) is the control. When a round's RTT was its mean,
// a round of fast answers only set a baseline of 10 ms that the usual
// rounds (16 ms) exceeded by more than 1.5: the limit shrank, its rounds
// held fewer answers, a round of fast answers only came more often, and
// it shrank further (342 answers against the static client's 527, the
// limit as low as 4). A round's RTT is its median now, which a tail of
// one in five does not move. README: the limit refuses the attempts above
// what the dependency serves in time; this one serves all 16 in time.
// Refused callers try again 2 ms later, so half a permit missing on
// average costs about 150 refusals. Seen: 93–97 % of the static client's
// answers, a mean limit of 15.2–15.6 (before: 62–72 %, 9.6–11.4); the
// bounds, for a loaded machine, are 80 %, a mean of 13, and at most one
// refusal per answer.
func TestAttack27ILatencyTailWithoutQueueingHoldsTheLimitLow(t *testing.T) {
	atkSkipUnderRace(t)
	atkNoLeak(t)
	r := atk27iSideBySide(t, policy.AdaptiveLimit{},
		atk27iTail(1, 10*time.Millisecond, 40*time.Millisecond), atk27iTail(1, 10*time.Millisecond, 40*time.Millisecond),
		server.Slow(16*time.Millisecond))
	st, at, ct, mean := &r.st, &r.at, &r.ct, r.mean
	lowest, clowest := r.lowest, r.clowest
	t.Logf("static:   %d answers, %d refused, %d timed out", st.ok.Load(), st.limited.Load(), st.timedOut.Load())
	t.Logf("adaptive: %d answers, %d refused by the limit, %d timed out; limit mean %.1f, lowest %d", at.ok.Load(), at.limited.Load(), at.timedOut.Load(), mean, lowest)
	t.Logf("control (adaptive, 16 ms, no tail): %d answers, %d refused; lowest limit %d", ct.ok.Load(), ct.limited.Load(), clowest)
	if at.ok.Load()*10 < st.ok.Load()*8 || mean < 13 || at.limited.Load() > at.ok.Load() {
		t.Errorf("a dependency that never queues, 10 ms and one call in five 40 ms: the adaptive client answered %d (the static bulkhead %d) "+
			"and refused %d calls by the limit (mean limit %.1f of 16, lowest %d; the control without the tail: %d answers, %d refused); "+
			"README: the limit refuses only above what the dependency serves in time: want at least 80 %% of the static client's answers, "+
			"a mean limit of 13 or more and at most one refusal per answer",
			at.ok.Load(), st.ok.Load(), at.limited.Load(), mean, lowest, ct.ok.Load(), ct.limited.Load())
	}
}

// TestAttack27ILatencyStepWithoutQueueingHoldsTheLimitAtItsMinimum: two
// servers answer GetStock in 2 ms, then, from a moment on, in 8 ms (a
// release that does more per call, a colder cache), whatever is in
// flight: they never queue, before or after. Two clients of the same
// policy (16 permits, 1 s attempts, no breaker, no retries), one with
// the default adaptive limit under the permits, 16 callers each: 300 ms
// at 2 ms, then 500 ms at 8 ms. The baseline remembers the 2 ms rounds
// for baseline_window (30 s), every round after the step is 4 times
// slower than it; before the not-queueing rule each shrank the limit by
// a quarter, to 1 within a few dozen milliseconds, for 30 s (one call let
// through per refused one, the static client 16 times the answers).
// README: the limit refuses at once the attempts above what the
// dependency currently serves in time; this one serves 16 at once in
// 8 ms. The not-queueing rule needs a few rounds at fewer calls to see
// that the latency did not follow them, and rounds of a few answers on a
// loaded 2-core machine are noisy: the limit has dipped to 2 for those
// rounds (one run in three under load), and the callers here retry a
// refusal at once, so such a dip costs up to 500 refusals, and up to
// 650 with the machine busier still (637 answers against 815, 78 %, in a
// CI run beside a fuzzing neighbour; stop 29's code, before this stop's
// changes, gave 716 of 883 on a quiet one). What the rule must hold is
// most of what the static client gets: 75 % of its answers (11 % before
// the rule), no more refusals than answers, and the limit back at 12 or
// more by the end.
func TestAttack27ILatencyStepWithoutQueueingHoldsTheLimitAtItsMinimum(t *testing.T) {
	atkSkipUnderRace(t)
	atkNoLeak(t)
	const callers = 16
	build := func(adaptive bool) (func() error, func(server.Behaviour), *prometheus.Registry) {
		fs, cc := startFault(t, server.Slow(2*time.Millisecond))
		readyConn(t, cc)
		reg := prometheus.NewRegistry()
		c := adaptiveClient(t, cc, func(p *policy.Service) {
			p.Breaker, p.ClientThrottle, p.Budget = nil, nil, nil
			p.Bulkhead = &policy.Bulkhead{Permits: callers}
			if adaptive {
				p.AdaptiveLimit = &policy.AdaptiveLimit{}
			}
			m := atkMethod(p, atkGetStock)
			m.Retry, m.Timeout, m.OverallTimeout = nil, time.Second, 0
		}, runtime.WithRegisterer(reg))
		return func() error { _, err := getStockOf(context.Background(), c); return err }, fs.SetBehaviour, reg
	}
	static, setStatic, _ := build(false)
	adapt, setAdapt, reg := build(true)
	both := func(d time.Duration, st, at *atk27iTally, sample func()) {
		until := time.Now().Add(d)
		var wg sync.WaitGroup
		wg.Go(func() { atk27iLoop(t, static, callers, until, st) })
		wg.Go(func() { atk27iLoop(t, adapt, callers, until, at) })
		if sample != nil {
			wg.Go(func() {
				for ; time.Now().Before(until); time.Sleep(5 * time.Millisecond) {
					sample()
				}
			})
		}
		wg.Wait()
	}
	var st0, at0 atk27iTally
	both(300*time.Millisecond, &st0, &at0, nil)
	before := metricValue(t, reg, "resilient_client_adaptive_limit")
	t.Logf("2 ms: static %d answers; adaptive %d answers, %d refused; limit %v", st0.ok.Load(), at0.ok.Load(), at0.limited.Load(), before)

	setStatic(server.Slow(8 * time.Millisecond))
	setAdapt(server.Slow(8 * time.Millisecond))
	var st, at atk27iTally
	var sum, samples int
	lowest := callers
	both(500*time.Millisecond, &st, &at, func() {
		l := int(metricValue(t, reg, "resilient_client_adaptive_limit"))
		lowest = min(lowest, l)
		sum += l
		samples++
	})
	mean := float64(sum) / float64(max(samples, 1))
	end := metricValue(t, reg, "resilient_client_adaptive_limit")
	t.Logf("8 ms: static %d answers; adaptive %d answers, %d refused by the limit; limit mean %.1f, lowest %d, %v at the end",
		st.ok.Load(), at.ok.Load(), at.limited.Load(), mean, lowest, end)
	if at.ok.Load()*4 < st.ok.Load()*3 || at.limited.Load() > at.ok.Load() || end < 12 {
		t.Errorf("a dependency that never queues, its latency stepped from 2 ms to 8 ms: in the next 500 ms the adaptive client answered %d (the static bulkhead %d) "+
			"and refused %d calls by the limit (mean limit %.1f of 16, lowest %d; %v before the step); README: the limit refuses only above what the "+
			"dependency serves in time: want at least 75 %% of the static client's answers, at most one refusal per answer and "+
			"the limit back at 12 or more (%v at the end)",
			at.ok.Load(), st.ok.Load(), at.limited.Load(), mean, lowest, before, end)
	}
}
