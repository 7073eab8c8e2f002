package runtime

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// Two refusals by the limit read the clock in one order and record it in
// the other (the later reader stored first): the episode is a second
// after the later of the two, not after the one stored last. Before, an
// admission 1.5 s after the earlier and 0.5 s after the later refusal
// ended the episode, and the next refusal was reported as a new one.
func TestAttack25EpisodeEndsAfterTheLaterOfTwoRefusalsStoredOutOfOrder(t *testing.T) {
	p := adPolicy(func(p *policy.Service) {
		p.Methods[0].AdaptiveLimit = &policy.AdaptiveLimit{InitialLimit: 1, MaxLimit: 1}
	})
	var events []Event
	c, clock := adClient(t, p, WithObserver(func(e Event) { events = append(events, e) }))
	m := c.Method(0)
	cl := m.concurrency
	n := c.now()
	_ = m.concurrencyLimited(cl, n+int64(time.Second)) // the later reading, stored first
	_ = m.concurrencyLimited(cl, n)                    // the earlier, stored last
	clock.advance(1500 * time.Millisecond)
	g, err := m.enter()
	if err != nil {
		t.Fatalf("enter: %v, want admitted", err)
	}
	m.concurrency.l.ReleaseAt(g.tok, 0, 0, c.now())
	if !cl.limiting.Load() {
		t.Errorf("the episode ended 0.5 s after its last refusal; want it to go on until a second after it")
	}
	if len(events) != 1 {
		t.Errorf("%d events, want the episode's one", len(events))
	}
}
