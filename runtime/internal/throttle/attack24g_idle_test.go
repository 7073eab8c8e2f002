package throttle

import (
	"testing"
	"time"
)

// A throttler with a 1 s window (100 ms buckets) whose client was idle for
// eleven days, about 2^23 buckets, still throttles an outage: before, every
// request it was told of fell in a slot whose wrapped epoch looked newer
// than now and was dropped, so it refused nothing for the next eleven days.
func TestAttack24gThrottlerThrottlesAfterElevenIdleDays(t *testing.T) {
	base := time.Unix(0, 0)
	th, err := New(Policy{Window: time.Second}, base, func() float64 { return 0.5 })
	if err != nil {
		t.Fatal(err)
	}
	at := base
	for range 50 { // a healthy second
		at = at.Add(20 * time.Millisecond)
		if th.Allow(at) {
			th.Record(at, true)
		}
	}
	at = at.Add(11 * 24 * time.Hour)
	sent := 0
	for range 100 { // a down dependency, one second of it
		at = at.Add(10 * time.Millisecond)
		if th.Allow(at) {
			sent++
			th.Record(at, false)
		}
	}
	if p := th.RefusalProbability(at); p != 0.9 {
		t.Errorf("refusal probability after 100 refused requests = %v, want the cap 0.9", p)
	}
	if sent > 20 {
		t.Errorf("%d of 100 requests reached the down dependency, want at most 20 (the cap lets 1 in 10 through, the climb a few more)", sent)
	}
}
