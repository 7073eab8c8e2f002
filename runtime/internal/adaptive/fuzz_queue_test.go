package adaptive

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
)

// FuzzPureQueueIsNeverTakenForALatency checks a property of the rules, not
// their bookkeeping (FuzzLimiter's model writes the rules out as the code
// does, so it cannot find a wrong rule): a dependency that only queues, its
// latency base × max(in flight, capacity) / capacity, its unloaded latency
// base never moving, must never have the not-queueing rule restart its
// baseline higher (within the window only a restart raises the least of
// its rounds), whatever its capacity does, provided the capacity
// holds each value at least 6 s (README, Limits, known and open: a
// capacity swinging as fast as the limit falls, every 3 s, is misread).
// The callers, their number, base, the capacities and how long each holds
// are the fuzzer's; the baseline window is 10 minutes, so that only the
// rule, not the window, can raise the baseline.
func FuzzPureQueueIsNeverTakenForALatency(f *testing.F) {
	f.Add([]byte{40, 20, 25, 6, 18, 6, 8, 10, 24, 6})
	f.Add([]byte{60, 40, 25, 0, 12, 2, 40, 4, 9, 0, 30, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		callers := int(prog.Next()%100) + 1
		base := time.Duration(prog.Next()%50+1) * time.Millisecond
		type phase struct {
			from     time.Duration
			capacity int
		}
		var phases []phase
		var at time.Duration
		for len(phases) < 8 && !prog.Done() {
			phases = append(phases, phase{at, int(prog.Next()%60) + 1})
			at += 6*time.Second + time.Duration(prog.Next()%20)*time.Second
		}
		if len(phases) == 0 {
			return
		}
		c := &cascade{l: mustNew(t, Policy{BaselineWindow: 10 * time.Minute}), timeout: time.Hour}
		for i := range callers {
			c.q = append(c.q, event{at: time.Duration(i) * time.Millisecond, caller: i})
		}
		c.latency = func(now time.Duration, inFlight int) time.Duration {
			k := phases[0].capacity
			for _, p := range phases {
				if now >= p.from {
					k = p.capacity
				}
			}
			return base * time.Duration(max(inFlight, k)) / time.Duration(k)
		}
		least := time.Duration(1<<63 - 1) // no baseline yet
		c.run(at, func(now time.Duration) {
			b := c.l.atk29aBaseline(now)
			if b > least {
				t.Fatalf("at %v the baseline rose from %v to %v (unloaded %v) for a dependency that only queues (capacities %v, %d callers): "+
					"the not-queueing rule took a queue for a latency", now, least, b, base, phases, callers)
			}
			least = b
		})
	})
}
