package runtime

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack27DANewcomerNeverJumpsALateTimersQueue: README, Rate limit:
// "a queue served in the order calls came". The bucket's timer is late
// (the clock moves on without it): the tokens that came meanwhile go to
// those who waited, and a newcomer finding them waits behind them. A
// bucket of 3 at 10/s, emptied: two waiters (100 and 200 ms); at 150 ms,
// the timer not yet run, the first has its token and a newcomer waits
// for the token after the second waiter's (150 ms more, at 300 ms); at
// 250 ms another finds the second served and waits behind the first
// newcomer (150 ms more); a second later both are served by the next
// look, none skipped.
func TestAttack27DANewcomerNeverJumpsALateTimersQueue(t *testing.T) {
	f := newFakeBucket(policy.RateLimit{RequestsPerSecond: 10, Burst: 3, MaxWait: time.Second})
	ctx := context.Background()
	for range 3 {
		f.admit(t, ctx)
	}
	a, _, _ := f.admit(t, ctx)
	b, _, _ := f.admit(t, ctx)
	f.now = f.now.Add(150 * time.Millisecond) // the timer, due at 100 ms, has not run
	c, wait, err := f.admit(t, ctx)
	if c == nil || err != nil || !granted(a) || granted(b) || wait != 150*time.Millisecond {
		t.Fatalf("a newcomer at 150 ms, the timer late: waiter %v, wait %v, %v; first waiter served %v, second %v; "+
			"want the first served, the newcomer 150 ms behind the second", c != nil, wait, err, granted(a), granted(b))
	}
	f.now = f.now.Add(100 * time.Millisecond) // 250 ms: b's token (200 ms) came, c's (300 ms) not
	d, wait, err := f.admit(t, ctx)
	if d == nil || err != nil || !granted(b) || granted(c) || wait != 150*time.Millisecond {
		t.Fatalf("a newcomer at 250 ms: waiter %v, wait %v, %v; second served %v, first newcomer %v; "+
			"want the second served, the newcomer 150 ms away (behind the first newcomer's 50)", d != nil, wait, err, granted(b), granted(c))
	}
	f.now = f.now.Add(time.Second)
	f.serve(f.now)
	if !granted(c) || !granted(d) || len(f.queue) != 0 {
		t.Errorf("a second later: newcomers served %v %v, %d still queued", granted(c), granted(d), len(f.queue))
	}
}

// TestAttack27DTheTimerNeverWakesEarlyNorLate: README, Rate limit: a
// bucket "refilled at requests_per_second". 64 waiters queued on an
// empty bucket of 1, and the timer run exactly when it asks to be, at
// rates whose token periods no float64 holds (1/3 s, 1/π s, 1/7e-3 s,
// 1/(1e9+7) s, 3 tokens a nanosecond): every run of the timer serves at
// least one waiter (never woken before a token is whole, never a waiter
// left with its token due), and the k-th waiter is served no earlier than
// k tokens' time, and no later than that plus a nanosecond for each run.
func TestAttack27DTheTimerNeverWakesEarlyNorLate(t *testing.T) {
	for _, rate := range []float64{3, math.Pi, 7e-3, 1e9 + 7, 3e9, 0.1, 1.0 / 3, 123456.789} {
		const n = 64
		maxWait := time.Duration(math.MaxInt64)
		f := newFakeBucket(policy.RateLimit{RequestsPerSecond: rate, Burst: 1, MaxWait: maxWait})
		ctx := context.Background()
		f.admit(t, ctx)
		start := f.now
		ws := make([]*rateWaiter, n)
		for i := range ws {
			w, _, err := f.admit(t, ctx)
			if w == nil || err != nil {
				t.Fatalf("rate %g: waiter %d: %v", rate, i, err)
			}
			ws[i] = w
		}
		served, runs := 0, 0
		for served < n && runs < 4*n {
			if f.armed <= 0 {
				t.Fatalf("rate %g: %d waiters served, %d still queued, no timer armed: they hang", rate, served, len(f.queue))
			}
			f.after(f.armed)
			runs++
			got := 0
			for served < n && granted(ws[served]) {
				k := served + 1
				earliest := float64(k) / rate * 1e9
				if at := float64(f.now.Sub(start)); at < earliest-1e-9/rate*1e9-1 {
					t.Errorf("rate %g: waiter %d served at %v, before its %d tokens came at %v", rate, k, f.now.Sub(start), k, time.Duration(earliest))
				} else if at > earliest+float64(runs)+1 {
					t.Errorf("rate %g: waiter %d served at %v, its tokens whole at %v", rate, k, f.now.Sub(start), time.Duration(earliest))
				}
				served++
				got++
			}
			if got == 0 {
				t.Errorf("rate %g: the timer ran at %v as it asked and served nobody (%v tokens)", rate, f.now.Sub(start), f.tokens)
			}
		}
		if served < n {
			t.Errorf("rate %g: %d of %d waiters served after %d runs of the timer", rate, served, n, runs)
		}
	}
}

// TestAttack27DALateTimerDelaysNoWaiterButByItsLateness: README, Rate
// limit: a call waits "if its turn comes within max_wait and before the
// call's deadline (counting a token for each call queued before it)", the
// bucket "refilled at requests_per_second". A bucket of 1 at 10/s that
// lets a call wait 1 s, emptied, and 10 waiters, the last told 1 s. The
// timer runs 10 ms late each time, as a loaded machine's would: the k-th
// waiter's token came at k × 100 ms, and it may be served a lateness
// after that, at k × 100 + 10 ms. When the bucket caps what a late timer
// refilled at its burst before serving those who wait, the time each run
// was late is lost to every waiter behind: the k-th is served at
// k × 110 ms, the last at 1.1 s, past the max wait it was admitted for.
func TestAttack27DALateTimerDelaysNoWaiterButByItsLateness(t *testing.T) {
	const late = 10 * time.Millisecond
	f := newFakeBucket(policy.RateLimit{RequestsPerSecond: 10, Burst: 1, MaxWait: time.Second})
	ctx := context.Background()
	f.admit(t, ctx)
	start := f.now
	var ws []*rateWaiter
	for k := 1; k <= 10; k++ {
		w, wait, err := f.admit(t, ctx)
		if w == nil || err != nil || wait != time.Duration(k)*100*time.Millisecond {
			t.Fatalf("waiter %d: %v, told %v; want to wait %v", k, err, wait, time.Duration(k)*100*time.Millisecond)
		}
		ws = append(ws, w)
	}
	served := 0
	for runs := 0; served < len(ws) && runs < 100; runs++ {
		f.after(f.armed + late)
		for served < len(ws) && granted(ws[served]) {
			served++
			due := time.Duration(served) * 100 * time.Millisecond
			if at := f.now.Sub(start); at > due+late {
				t.Errorf("waiter %d, told %v, served at %v: its token came at %v, the timer %v late",
					served, due, at, due, late)
			}
		}
	}
	if served != len(ws) {
		t.Errorf("%d of %d waiters served", served, len(ws))
	}
}
