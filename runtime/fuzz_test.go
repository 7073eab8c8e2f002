package runtime

import (
	"math"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/window"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The fuzz targets below read their input as a program: a few bytes of
// policy, then steps (admit a call, record an outcome, move the clock,
// look at the state). They run it against the real breaker or budget and
// against a reference model written for clarity, not speed, and fail at the
// first step where the two disagree or an invariant breaks. The seed corpus
// is in testdata/fuzz/<FuzzName>; CI runs each target for a few seconds.

// breakerModel is the state machine of the README's "Circuit breaker"
// section, over the same bucketed window as the breaker: ten buckets of
// Window/10, the current one and the nine before it.
type breakerModel struct {
	p           policy.Breaker
	width       int64
	state       State
	gen         uint64
	openUntil   int64
	admitted    int // probes admitted in this half-open spell, less those ignored
	succeeded   int
	events      []modelEvent
	lastFailure int64
}

type modelEvent struct {
	bucket  int64
	failure bool
}

func newBreakerModel(p policy.Breaker) *breakerModel {
	return &breakerModel{p: p, width: max(int64(p.Window)/window.Buckets, 1), lastFailure: math.MinInt64 / 2}
}

func (m *breakerModel) sum(n int64) (calls, failures int) {
	cur := n / m.width
	for _, e := range m.events {
		if cur-e.bucket < window.Buckets {
			calls++
			if e.failure {
				failures++
			}
		}
	}
	return calls, failures
}

func (m *breakerModel) to(s State, n int64) {
	m.gen++
	m.state = s
	switch s {
	case StateOpen:
		m.openUntil = n + int64(m.p.CoolDown)
	case StateHalfOpen:
		m.admitted, m.succeeded = 0, 0
	case StateClosed:
		m.events = nil
		m.lastFailure = math.MinInt64 / 2
	}
}

func (m *breakerModel) stateAt(n int64) State {
	if m.state == StateOpen && n >= m.openUntil {
		return StateHalfOpen
	}
	return m.state
}

func (m *breakerModel) allow(n int64) (ticket, time.Duration, bool) { return m.allowAs(n, true) }

// allowAs is allow for a unary call (probe true) or a stream that may not
// take a half-open probe: admitted then as a bystander, whose failure alone
// counts.
func (m *breakerModel) allowAs(n int64, probe bool) (ticket, time.Duration, bool) {
	for {
		switch m.state {
		case StateClosed:
			return ticket{gen: m.gen}, 0, true
		case StateOpen:
			if n < m.openUntil {
				return ticket{}, time.Duration(m.openUntil - n), false
			}
			m.to(StateHalfOpen, n)
		case StateHalfOpen:
			if !probe {
				return ticket{gen: m.gen, bystander: true}, 0, true
			}
			if m.admitted >= m.p.HalfOpenProbes {
				return ticket{}, 0, false
			}
			m.admitted++
			return ticket{gen: m.gen, probe: true}, 0, true
		}
	}
}

func (m *breakerModel) done(t ticket, o outcome, latency time.Duration, n int64) {
	if o == outcomeSuccess && m.p.SlowCallThreshold > 0 && latency > m.p.SlowCallThreshold {
		o = outcomeFailure
	}
	if t.gen != m.gen {
		return
	}
	if t.bystander {
		if o == outcomeFailure {
			m.to(StateOpen, n)
		}
		return
	}
	if t.probe {
		switch o {
		case outcomeFailure:
			m.to(StateOpen, n)
		case outcomeSuccess:
			m.succeeded++
			if m.succeeded >= m.p.HalfOpenProbes {
				m.to(StateClosed, n)
			}
		case outcomeIgnored:
			m.admitted--
		}
		return
	}
	switch o {
	case outcomeSuccess:
		m.events = append(m.events, modelEvent{n / m.width, false})
	case outcomeFailure:
		m.events = append(m.events, modelEvent{n / m.width, true})
		m.lastFailure = n
	default:
		return
	}
	calls, failures := m.sum(n)
	// The README: failures / calls ≥ failure_ratio, as a share.
	if calls >= m.p.MinimumCalls && float64(failures)/float64(calls) >= m.p.FailureRatio {
		m.to(StateOpen, n)
	}
}

// legal lists the state changes the state machine allows between two
// looks at the state.
func legal(from, to State) bool {
	switch {
	case from == to:
		return true
	case from == StateClosed:
		return to == StateOpen
	case from == StateOpen:
		return to == StateHalfOpen
	case from == StateHalfOpen:
		return true // closed when the probes succeeded, open when one failed
	}
	return false
}

func FuzzBreaker(f *testing.F) {
	f.Add([]byte{49, 3, 9, 9, 1, 0, 0, 0, 1, 0, 4, 0, 1, 1, 4, 1, 1, 2, 4, 2, 3, 0, 2, 200, 0, 1, 3, 4, 3})
	f.Add([]byte{99, 0, 0, 0, 2, 5, 0, 0, 0, 0, 1, 0, 36, 1, 1, 20, 2, 255, 0, 0, 0, 1, 2, 0, 1, 3, 0, 3})
	f.Add([]byte{0, 7, 49, 49, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 4, 1, 1, 4, 2, 1, 4, 3, 1, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		p := policy.Breaker{
			FailureRatio:   float64(prog.Next()%100+1) / 100,
			MinimumCalls:   int(prog.Next()%8) + 1,
			Window:         time.Duration(prog.Next()%50+1) * 10 * time.Millisecond,
			CoolDown:       time.Duration(prog.Next()%50+1) * 10 * time.Millisecond,
			HalfOpenProbes: int(prog.Next()%4) + 1,
		}
		if s := prog.Next() % 10; s > 0 {
			p.SlowCallThreshold = time.Duration(s) * 10 * time.Millisecond
		}
		base := time.Unix(1_000_000, 0)
		var transitions []State
		b := newBreaker(p, base, func(_, to State) { transitions = append(transitions, to) })
		m := newBreakerModel(p)
		var n int64 // nanoseconds since base
		type held struct {
			t    ticket
			done bool
		}
		var tickets []held
		last := StateClosed
		for step := 0; !prog.Done() && step < 4096; step++ {
			now := base.Add(time.Duration(n))
			op := prog.Next()
			switch op % 4 {
			case 0: // a call asks to go through; with the top bit, a stream that may not probe
				probe := op < 128
				got, gotAfter, gotOK := b.allow(func() int64 { return n }, probe)
				want, wantAfter, wantOK := m.allowAs(n, probe)
				if gotOK != wantOK || got != want || gotAfter != wantAfter {
					t.Fatalf("step %d at %v: Allow = %+v, %v, %v; the model says %+v, %v, %v",
						step, time.Duration(n), got, gotAfter, gotOK, want, wantAfter, wantOK)
				}
				if gotOK {
					tickets = append(tickets, held{t: got})
				}
			case 1: // a call admitted earlier ends
				if len(tickets) == 0 {
					continue
				}
				i := int(prog.Next()) % len(tickets)
				if tickets[i].done {
					continue // a ticket is given back once
				}
				tickets[i].done = true
				o := outcome(op >> 2 % 3)
				latency := time.Duration(op>>4) * 5 * time.Millisecond
				b.doneAt(tickets[i].t, o, latency, now)
				m.done(tickets[i].t, o, latency, n)
			case 2: // time passes
				n += int64(prog.Next()) * int64(time.Millisecond)
			case 3: // nothing but a look at the state
			}
			now = base.Add(time.Duration(n))
			got := b.stateAtTime(now)
			if want := m.stateAt(n); got != want {
				t.Fatalf("step %d at %v: state %v, the model says %v", step, time.Duration(n), got, want)
			}
			if !legal(last, got) {
				t.Fatalf("step %d: the state went from %v to %v", step, last, got)
			}
			last = got
			// Never more probes in flight than configured.
			inFlight := 0
			for _, h := range tickets {
				if h.t.probe && !h.done && h.t.gen == m.gen {
					inFlight++
				}
			}
			if inFlight > p.HalfOpenProbes {
				t.Fatalf("step %d: %d probes in flight, the policy allows %d", step, inFlight, p.HalfOpenProbes)
			}
		}
		if uint64(len(transitions)) != m.gen {
			t.Fatalf("%d transitions reported to onTransition, the model made %d", len(transitions), m.gen)
		}
	})
}

// budgetModel is the retry budget with the ratio as a whole percentage, so
// that the allowance is exact integer arithmetic.
type budgetModel struct {
	percent, floor int64
	width          int64
	events         []modelEvent // failure: a retry; otherwise a request
}

func (m *budgetModel) sum(n int64) (requests, retries int64) {
	cur := n / m.width
	for _, e := range m.events {
		// A retry stays for all Buckets buckets, a request for the newest
		// Buckets−1 (window.NewLasting, SumSplit).
		if age := cur - e.bucket; e.failure && age < window.Buckets {
			retries++
		} else if !e.failure && age < window.Buckets-1 {
			requests++
		}
	}
	return requests, retries
}

// lastingWidth is the width of a bucket of window.NewLasting(d): a ninth of
// d, rounded up.
func lastingWidth(d time.Duration) int64 {
	return max((int64(d)+window.Buckets-2)/(window.Buckets-1), 1)
}

func (m *budgetModel) allowance(requests int64) int64 { return m.percent*requests/100 + m.floor }

func FuzzBudget(f *testing.F) {
	f.Add([]byte{9, 2, 9, 0, 0, 0, 1, 1, 1, 1, 3, 2, 50, 1, 3, 2, 200, 1, 3})
	f.Add([]byte{28, 0, 49, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 3, 2, 255, 2, 255, 1, 3})
	f.Add([]byte{99, 4, 0, 1, 1, 1, 1, 1, 1, 1, 3, 0, 1, 0, 1, 2, 5, 1, 1, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		percent := int64(prog.Next()%100) + 1
		p := policy.Budget{
			Ratio:      float64(percent) / 100,
			MinRetries: int(prog.Next() % 5),
			Window:     time.Duration(prog.Next()%50+1) * 10 * time.Millisecond,
		}
		base := time.Unix(1_000_000, 0)
		b := newBudget(p, base)
		m := &budgetModel{percent: percent, floor: int64(p.MinRetries), width: lastingWidth(p.Window)}
		var n int64
		for step := 0; !prog.Done() && step < 4096; step++ {
			now := base.Add(time.Duration(n))
			switch prog.Next() % 4 {
			case 0: // a request
				b.requestAt(now)
				m.events = append(m.events, modelEvent{n / m.width, false})
			case 1: // a retry asks to go
				requests, retries := m.sum(n)
				want := retries+1 <= m.allowance(requests)
				if got := b.tryRetryAt(now); got != want {
					t.Fatalf("step %d at %v: TryRetry = %v with %d requests and %d retries in the window (ratio %v, floor %d); want %v",
						step, time.Duration(n), got, requests, retries, p.Ratio, p.MinRetries, want)
				}
				if want {
					m.events = append(m.events, modelEvent{n / m.width, true})
					// Never more retries than the budget allows.
					if _, retries := m.sum(n); retries > m.allowance(requests) {
						t.Fatalf("step %d: %d retries in the window, the budget allows %d", step, retries, m.allowance(requests))
					}
				}
			case 2: // time passes
				n += int64(prog.Next()) * int64(time.Millisecond)
			case 3:
				requests, retries := m.sum(n)
				if got, want := b.availableAt(now), max(0, m.allowance(requests)-retries); int64(got) != want {
					t.Fatalf("step %d: Available = %d, want %d", step, got, want)
				}
			}
		}
	})
}
