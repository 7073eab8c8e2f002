package runtime_test

// Attack 29a: the adaptive limit's not-queueing rule against real loopback
// servers that queue on purpose (README "Adaptive concurrency limit": "A
// round that is slow against the baseline may be a queue or a dependency
// whose own latency moved ... a queue's wait shortens with the calls ahead
// in it, a slower dependency stays as slow"; "Limits, known and open").

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk29aSide is one client of an adaptive limit (or a static bulkhead)
// against its own server of workers, with a closed loop of callers.
type atk29aSide struct {
	w    *atk27iWorkers
	call func() (time.Duration, error)
	reg  *prometheus.Registry
}

// newAtk29aSide builds a server of workers (w may be nil for a behaviour
// b) and a client of permits, no breaker, throttle, budget or retries,
// GetStock's attempt timeout timeout, and the adaptive limit al (nil: a
// static bulkhead).
func newAtk29aSide(t *testing.T, b server.Behaviour, w *atk27iWorkers, permits int, timeout time.Duration, al *policy.AdaptiveLimit) *atk29aSide {
	t.Helper()
	if w != nil {
		b = w.behaviour()
	}
	_, cc := startFault(t, b)
	readyConn(t, cc)
	reg := prometheus.NewRegistry()
	c := adaptiveClient(t, cc, func(p *policy.Service) {
		p.Breaker, p.ClientThrottle, p.Budget = nil, nil, nil
		p.Bulkhead = &policy.Bulkhead{Permits: permits}
		p.AdaptiveLimit = al
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, timeout, 0
	}, runtime.WithRegisterer(reg))
	return &atk29aSide{w: w, reg: reg, call: func() (time.Duration, error) { return getStockOf(context.Background(), c) }}
}

func (s *atk29aSide) limit(t *testing.T) int {
	return int(metricValue(t, s.reg, "resilient_client_adaptive_limit"))
}

// atk29aSeen is what one side's callers saw in a phase: the tally, the
// answers' latencies and the limit sampled every 5 ms, both in the
// phase's second half.
type atk29aSeen struct {
	tl      atk27iTally
	mu      sync.Mutex
	latency []time.Duration
	limits  []int
}

func (s *atk29aSeen) meanLimit() float64 {
	var sum int
	for _, l := range s.limits {
		sum += l
	}
	return float64(sum) / float64(max(len(s.limits), 1))
}

func (s *atk29aSeen) p50() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.latency) == 0 {
		return 0
	}
	l := slices.Clone(s.latency)
	slices.Sort(l)
	return l[len(l)/2]
}

// atk29aRun runs callers on each side for d, side by side, sampling each
// adaptive side's limit (nil entries of adaptive: not sampled).
func atk29aRun(t *testing.T, sides []*atk29aSide, adaptive []bool, callers int, d time.Duration) []*atk29aSeen {
	t.Helper()
	seen := make([]*atk29aSeen, len(sides))
	until := time.Now().Add(d)
	half := time.Now().Add(d / 2)
	var wg sync.WaitGroup
	for i, s := range sides {
		seen[i] = &atk29aSeen{}
		sn := seen[i]
		call := func() error {
			took, err := s.call()
			if err == nil && time.Now().After(half) {
				sn.mu.Lock()
				sn.latency = append(sn.latency, took)
				sn.mu.Unlock()
			}
			return err
		}
		wg.Go(func() { atk27iLoop(t, call, callers, until, &sn.tl) })
	}
	for ; time.Now().Before(until); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(half) {
			for i, s := range sides {
				if adaptive[i] {
					seen[i].limits = append(seen[i].limits, s.limit(t))
				}
			}
		}
	}
	wg.Wait()
	return seen
}

// TestAttack29ACapacityThatLosesAQuarterLowersTheLimit: three servers of
// 12 workers, each serving a call in 20 ms (600 calls/s) and queueing the
// rest in line, a queue and nothing else; three clients (32 permits, the
// default adaptive limit with an initial 8, 1 s attempts), 32 callers
// each, side by side. For 500 ms the servers have 12 workers (the limit
// finds about 19, 12 × tolerance plus a round's growth), then for 700 ms
// 9: the calls in line take 20 ms × in flight / 9, so the limit should
// fall to about 14 (9 × tolerance), and it does in most runs. README: "a
// queue's wait shortens with the calls ahead in it"; "a queue still
// shrinks it"; "a capacity that halves and comes back is still followed".
// When one round at fewer calls not 15 % faster than the reference
// sufficed, and the reference's gradient was that of the latest round
// above three quarters of the run's first load, the two rounds compared
// differed in load by an eighth or so, the queue's round was only an
// eighth faster, and in about one run of three per server (every run of
// three side by side) the rule restarted the baseline from a queued round
// and the limit grew back: 18.6–20.2 → 22.8–25.7 (max 29), the calls'
// median from 36–40 ms to 55–61 ms, three times the unloaded 20 ms. The
// rule now compares rounds a quarter apart in load, twice in a row (the
// fake-clock TestAttack29AQueueThatLosesCapacityIsStillAQueue plays the
// same rounds deterministically).
func TestAttack29ACapacityThatLosesAQuarterLowersTheLimit(t *testing.T) {
	atkSkipUnderRace(t)
	atkNoLeak(t)
	const callers, servers = 32, 3
	sides := make([]*atk29aSide, servers)
	adaptive := make([]bool, servers)
	for i := range sides {
		sides[i] = newAtk29aSide(t, nil, newAtk27iWorkers(12, 20*time.Millisecond), callers, time.Second, &policy.AdaptiveLimit{InitialLimit: 8})
		adaptive[i] = true
	}
	full := atk29aRun(t, sides, adaptive, callers, 500*time.Millisecond)
	for _, s := range sides {
		s.w.take(3)
	}
	fewer := atk29aRun(t, sides, adaptive, callers, 700*time.Millisecond)
	for _, s := range sides {
		s.w.giveBack()
	}
	var raised []string
	for i := range sides {
		f, q := full[i], fewer[i]
		t.Logf("server %d: 12 workers: %d answers (p50 %v), limit %.1f; 9 workers: %d answers (p50 %v), %d refused, limit %.1f (max %d)",
			i, f.tl.ok.Load(), f.p50(), f.meanLimit(), q.tl.ok.Load(), q.p50(), q.tl.limited.Load(), q.meanLimit(), slices.Max(q.limits))
		if q.meanLimit() >= f.meanLimit() {
			raised = append(raised, fmt.Sprintf("server %d: %.1f → %.1f (p50 %v → %v)", i, f.meanLimit(), q.meanLimit(), f.p50(), q.p50()))
		}
	}
	if len(raised) > 0 {
		t.Errorf("servers that only queue lost a quarter of their workers (12 → 9, 20 ms a call), and the adaptive limit, averaged over each phase's second half, "+
			"did not fall: %v; README: a queue's wait shortens with the calls ahead in it, and a queue still shrinks the limit (about 9 × tolerance, 13.5)", raised)
	}
}

// TestAttack29AQueueThatAnotherClientFillsNeedsTheTimeout: the known
// limit "A queue that other clients fill" (README, Limits: "a dependency
// queued by other clients' load stays as slow when this client sends
// fewer, reads as not queueing, and this client's limit then holds where a
// drop (a timeout, a shed) does not halve it. Give such a dependency's
// methods an attempt timeout"), measured, and its remedy checked. Two
// servers of 4 workers, 10 ms a call, in line. On each, client A (the
// adaptive limit, initial 2, at most its 16 permits, 16 callers) first
// runs alone for 300 ms (its limit finds about 6, 4 × tolerance), then
// client B, a static bulkhead of 24 callers, keeps 24 calls in line for
// the next 600 ms: every call waits 60 ms or more whatever A sends. On the
// first server A's attempts have a 1 s timeout: the rule reads B's line
// as A's dependency's own latency, and in most runs A's limit does more
// than hold: it grows from about 6.5 alone to 10–12 (up to 15 of its 16),
// while the calls take 92–100 ms, 9 times the unloaded 10 ms (once in 5
// runs it fell to 3 instead; logged, not asserted: the README lists it as
// a known limit). On
// the second they have 30 ms, under the line's wait: every attempt is a
// drop, and the limit must be at 1 or 2 over the second half of the
// shared phase, one attempt per timeout or so reaching the line.
func TestAttack29AQueueThatAnotherClientFillsNeedsTheTimeout(t *testing.T) {
	atkSkipUnderRace(t)
	atkNoLeak(t)
	const callers, others = 16, 24
	var as, bs []*atk29aSide
	for _, timeout := range []time.Duration{time.Second, 30 * time.Millisecond} {
		w := newAtk27iWorkers(4, 10*time.Millisecond)
		_, cc := startFault(t, w.behaviour())
		readyConn(t, cc)
		client := func(al *policy.AdaptiveLimit, timeout time.Duration) *atk29aSide {
			reg := prometheus.NewRegistry()
			c := adaptiveClient(t, cc, func(p *policy.Service) {
				p.Breaker, p.ClientThrottle, p.Budget = nil, nil, nil
				p.Bulkhead = &policy.Bulkhead{Permits: max(callers, others)}
				p.AdaptiveLimit = al
				m := atkMethod(p, atkGetStock)
				m.Retry, m.Timeout, m.OverallTimeout = nil, timeout, 0
			}, runtime.WithRegisterer(reg))
			return &atk29aSide{w: w, reg: reg, call: func() (time.Duration, error) { return getStockOf(context.Background(), c) }}
		}
		as = append(as, client(&policy.AdaptiveLimit{MaxLimit: callers, InitialLimit: 2}, timeout))
		bs = append(bs, client(nil, time.Second))
	}
	both := []bool{true, true}
	alone := atk29aRun(t, as, both, callers, 300*time.Millisecond)
	var wg sync.WaitGroup
	var othersSeen []*atk29aSeen
	wg.Go(func() { othersSeen = atk29aRun(t, bs, []bool{false, false}, others, 650*time.Millisecond) })
	time.Sleep(20 * time.Millisecond) // B's line first
	shared := atk29aRun(t, as, both, callers, 600*time.Millisecond)
	wg.Wait()
	for i, name := range []string{"1 s attempts", "30 ms attempts"} {
		a, s, b := alone[i], shared[i], othersSeen[i]
		t.Logf("%s: A alone %d answers (p50 %v), limit %.1f; with B's line: A %d answers (p50 %v), %d timed out, %d refused, limit %.1f (range %d–%d); B %d answers (p50 %v)",
			name, a.tl.ok.Load(), a.p50(), a.meanLimit(), s.tl.ok.Load(), s.p50(), s.tl.timedOut.Load(), s.tl.limited.Load(),
			s.meanLimit(), slices.Min(s.limits), slices.Max(s.limits), b.tl.ok.Load(), b.p50())
	}
	if s := shared[1]; s.meanLimit() > 2 || s.tl.timedOut.Load()+s.tl.ok.Load() > 60 {
		t.Errorf("a line of 24 other calls (60 ms or more each) and A's attempts timing out at 30 ms: A's limit averaged %.1f over the second half (range %d–%d) "+
			"with %d attempts timed out and %d answered in 600 ms; README: give such a dependency's methods an attempt timeout (each drop halves the limit, to 1): "+
			"want a mean of at most 2 and at most 60 attempts let through",
			s.meanLimit(), slices.Min(s.limits), slices.Max(s.limits), s.tl.timedOut.Load(), s.tl.ok.Load())
	}
}

// TestAttack29AQueueWithATailIsStillHeldNearItsWorkers: a server of 2
// workers, each call 8 ms and one in ten 28 ms (seeded), in line: a queue
// whose service time has a tail, so that its rounds, a few answers each,
// are fast or slow by luck as well as by the line. One client, the default
// adaptive limit from 1 (so that its first rounds see the server
// unqueued), 16 permits, 16 callers, 1 s. A round at a quarter fewer calls
// that is slow by luck is read as not queueing and restarts the baseline
// from a queued round (a simulation of the limiter alone over 10 s: in 5
// seeds of 20 the calls took 3 to 6 times the unloaded latency, the limit
// at 9 to 14 on 2 workers), so the rule must not do it within a second:
// README "a queue still shrinks it". Seen: the limit about 3 over the
// second half, the calls' median 14–17 ms. The test allows a mean limit of
// 6 (3 calls per worker) and a median of 40 ms (four times the mean call).
func TestAttack29AQueueWithATailIsStillHeldNearItsWorkers(t *testing.T) {
	atkSkipUnderRace(t)
	atkNoLeak(t)
	const callers = 16
	free := make(chan struct{}, 2)
	free <- struct{}{}
	free <- struct{}{}
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(29, 1))
	tail := func(ctx context.Context, _ server.Call) error {
		select {
		case <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { free <- struct{}{} }()
		mu.Lock()
		d := 8 * time.Millisecond
		if r.Float64() < 0.1 {
			d = 28 * time.Millisecond
		}
		mu.Unlock()
		return server.Wait(ctx, d)
	}
	s := newAtk29aSide(t, tail, nil, callers, time.Second, &policy.AdaptiveLimit{InitialLimit: 1})
	seen := atk29aRun(t, []*atk29aSide{s}, []bool{true}, callers, time.Second)[0]
	t.Logf("2 workers, 8 ms a call, one in ten 28 ms: %d answers, %d refused; second half: limit %.1f (range %d–%d), median %v",
		seen.tl.ok.Load(), seen.tl.limited.Load(), seen.meanLimit(), slices.Min(seen.limits), slices.Max(seen.limits), seen.p50())
	if seen.meanLimit() > 6 || seen.p50() > 40*time.Millisecond {
		t.Errorf("a queue of 2 workers with a tail (8 ms, one call in ten 28 ms): over the second second the limit averaged %.1f (range %d–%d) and the calls' median was %v; "+
			"README: a queue still shrinks the limit, about where the line adds half the unloaded latency: want a mean of at most 6 and a median of at most 40 ms",
			seen.meanLimit(), slices.Min(seen.limits), slices.Max(seen.limits), seen.p50())
	}
}
