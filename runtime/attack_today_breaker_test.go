package runtime

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// closedTicket (and allow's closed case) hand out a ticket only for a
// closed generation: a ticket whose generation is an open or half-open
// one would let a non-probe call count in a state it was not admitted in
// (an extra call beside the half-open probes). A cycler drives the breaker
// round Closed → Open → HalfOpen → Closed while readers take tickets; each
// ticket's generation must be one the breaker was closed in.
func TestAttackTodayClosedTicketNeverOfAnotherState(t *testing.T) {
	b := newBreaker(policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: time.Second, CoolDown: time.Nanosecond,
		HalfOpenProbes: 1, FailureCodes: policy.CodesOf(14)}, time.Unix(0, 0), nil)
	const cycles = 20000
	// stateOf[gen] is the state the breaker entered at gen; gen 0 is closed.
	stateOf := make([]atomic.Int32, 3*cycles+2)
	var stop atomic.Bool
	var wg sync.WaitGroup
	bad := make(chan ticket, 1)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for _, take := range []func() (ticket, bool){
					b.closedTicket,
					func() (ticket, bool) {
						tk, _, ok := b.allow(func() int64 { return 0 }, true) // never past the cool-down: no transition here
						return tk, ok && !tk.probe
					},
				} {
					tk, ok := take()
					if !ok {
						continue
					}
					// The cycler records a generation's state before entering it.
					if State(stateOf[tk.gen].Load()) != StateClosed {
						select {
						case bad <- tk:
						default:
						}
					}
				}
			}
		}()
	}
	n := int64(1)
	for range cycles {
		for _, to := range []State{StateOpen, StateHalfOpen, StateClosed} {
			gen := b.gen.Load()
			stateOf[gen+1].Store(int32(to))
			from := State(b.state.Load())
			b.transitionFrom(gen, from, to, n)
			n++
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case tk := <-bad:
		// It did before genState: the state and the generation were read
		// apart, and a transition between the two reads paired them wrongly.
		t.Fatalf("a non-probe ticket of generation %d, entered as %v, was handed out as closed", tk.gen, State(stateOf[tk.gen].Load()))
	default:
	}
}
