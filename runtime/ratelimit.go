package runtime

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// rateLimiter is a client's token bucket towards one dependency: Burst
// tokens, refilled at RequestsPerSecond, and a queue of the calls that wait
// for one, served in the order they came. It is the runtime's own rather
// than golang.org/x/time/rate's, for one reason: a caller that gives up
// waiting gives its place to those behind it. A cancelled x/time/rate
// reservation gives back only what no later reservation depends on, so
// with callers queued behind it nothing: under steady traffic the tokens
// of the waiters that left kept the bucket a max wait in debt, and 48
// impatient callers got 2 calls through in 600 ms where 14 were allowed
// (TestAttack27BWaitersThatLeaveNeverLetMoreThanTheRateThrough,
// TestAttack25cAWaiterThatLeavesGivesItsTokenBack).
//
// Every decision is made under mu with the time read once mu is held, so
// that the bucket sees its times in order.
type rateLimiter struct {
	p      policy.RateLimit
	mu     sync.Mutex
	tokens float64   // at last; at most Burst, and below 1 while a call waits
	last   time.Time // when tokens was last refilled
	queue  []*rateWaiter
	timer  *time.Timer           // wakes the queue when its head's token is due
	arm    func(d time.Duration) // r.armTimer; a test's own
}

// wholeToken is what the bucket takes for a whole token: the refill of a
// token's time, summed in float64 from several gaps, may fall short of 1 by
// a rounding (0.1 + 0.9 = 0.9999999999999999), and a waiter would wake a
// nanosecond after its token was due.
const wholeToken = 1 - 1e-9

// rateWaiter is one call waiting in the queue.
type rateWaiter struct {
	ready   chan struct{} // closed when the call is given its token
	granted bool          // under mu
}

// newRateLimiter returns a limiter whose bucket starts full.
func newRateLimiter(p policy.RateLimit) *rateLimiter {
	r := &rateLimiter{p: p, tokens: float64(p.Burst), last: time.Now()}
	r.arm = r.armTimer
	return r
}

// take takes a token for one call. It returns at once when a token is
// there and nobody waits before it; otherwise it waits for its turn if
// that comes within the policy's MaxWait and before ctx's deadline, and
// else refuses at once, with how long the call would have had to wait.
// A wait that ctx ends early gives the call's place (or the token it was
// just given, also one handed over as ctx ended or past its deadline)
// back, and returns ctx's error.
func (r *rateLimiter) take(ctx context.Context) (wait time.Duration, err error) {
	r.mu.Lock()
	w, wait, err := r.admit(ctx, time.Now())
	r.mu.Unlock()
	if w == nil {
		return wait, err
	}
	select {
	case <-w.ready:
		if err = over(ctx); err == nil {
			return wait, nil
		}
		// Handed its token just as its context ended (select chose
		// either), or past its deadline with its timer not yet run (gRPC
		// would refuse to send it): the call will not be made, so the
		// token goes back.
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.mu.Lock()
	r.leave(w, time.Now())
	r.mu.Unlock()
	return wait, err
}

// admit decides, under mu, what take does: go at once (no waiter), refuse
// (an error), or wait for the waiter it returns, with the wait it expects:
// the time until the bucket has refilled a token for each call queued
// before this one and one for it. Callers that leave the queue only make
// it shorter.
func (r *rateLimiter) admit(ctx context.Context, now time.Time) (*rateWaiter, time.Duration, error) {
	r.serve(now) // a late timer's due tokens go to those who waited first
	if len(r.queue) == 0 && r.tokens >= wholeToken {
		r.tokens--
		return nil, 0, nil
	}
	wait := r.until(float64(len(r.queue)+1) - r.tokens)
	if wait > r.p.MaxWait {
		return nil, wait, errRateRefused
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) <= wait {
		return nil, wait, errRateDeadline
	}
	w := &rateWaiter{ready: make(chan struct{})}
	r.queue = append(r.queue, w)
	if len(r.queue) == 1 {
		r.arm(r.until(1 - r.tokens))
	}
	return w, wait, nil
}

// leave takes w out of the queue, under mu: its place goes to the calls
// behind it, or, if it was given its token as its caller gave up, the
// token goes back to the bucket for them.
func (r *rateLimiter) leave(w *rateWaiter, now time.Time) {
	if w.granted {
		r.tokens++ // serve refills, then caps at Burst
	} else if i := slices.Index(r.queue, w); i >= 0 {
		r.queue = slices.Delete(r.queue, i, i+1)
	}
	r.serve(now)
}

// giveBack returns the token of a call that took one and was then not
// sent (the bulkhead refused it, or its context ended waiting for a
// permit): it goes to the next in the queue or back to the bucket.
func (r *rateLimiter) giveBack() {
	r.mu.Lock()
	r.tokens++ // serve refills, then caps at Burst
	r.serve(time.Now())
	r.mu.Unlock()
}

// serve refills the bucket and gives its tokens to the calls at the head
// of the queue, under mu; while some still wait, it wakes again when the
// next token is due. The bucket is capped at Burst only once they are
// served: the tokens refilled while calls waited were theirs, each due
// when its token came, and a timer run late (a loaded machine) hands them
// over late rather than losing them; capped first, a bucket of 1 lost the
// lateness of every run to every waiter behind, and let 58 to 74% of its
// rate through under a queue
// (TestAttack27DALateTimerDelaysNoWaiterButByItsLateness,
// TestAttack27DABucketOfOneKeepsItsRateUnderAQueue).
func (r *rateLimiter) serve(now time.Time) {
	r.refill(now)
	for len(r.queue) > 0 && r.tokens >= wholeToken {
		w := r.queue[0]
		r.queue = slices.Delete(r.queue, 0, 1)
		r.tokens--
		w.granted = true
		close(w.ready)
	}
	r.tokens = min(r.tokens, float64(r.p.Burst))
	if len(r.queue) > 0 {
		r.arm(r.until(1 - r.tokens))
	}
}

// refill adds the tokens of the time since the last refill: up to Burst
// when nobody waits, all of them for the calls that wait (serve gives
// them out, then caps the rest).
func (r *rateLimiter) refill(now time.Time) {
	if d := now.Sub(r.last); d > 0 {
		// An Inf (a long gap at a huge rate) is Burst all the same, or
		// serves every waiter and is then capped.
		r.tokens += d.Seconds() * r.p.RequestsPerSecond
		if len(r.queue) == 0 {
			r.tokens = min(r.tokens, float64(r.p.Burst))
		}
		r.last = now
	}
}

// until is how long the bucket takes to refill n tokens (n > 0): at least
// a nanosecond, at most the longest Duration (a rate may be as small as a
// float64 is).
func (r *rateLimiter) until(n float64) time.Duration {
	ns := math.Ceil(n / r.p.RequestsPerSecond * 1e9)
	if !(ns < math.MaxInt64) {
		return math.MaxInt64
	}
	return max(time.Duration(ns), 1)
}

// armTimer has serve run after d, once: a later arming replaces it.
func (r *rateLimiter) armTimer(d time.Duration) {
	if r.timer == nil {
		r.timer = time.AfterFunc(d, func() {
			r.mu.Lock()
			r.serve(time.Now())
			r.mu.Unlock()
		})
		return
	}
	r.timer.Reset(d)
}

var (
	errRateRefused  = fmt.Errorf("no token within the max wait")
	errRateDeadline = fmt.Errorf("no token before the deadline")
)

// takeToken applies the method's rate limit, if any; it returns the error
// to give the caller when the call may not go.
func (m *methodState) takeToken(ctx context.Context) error {
	wait, err := m.limiter.take(ctx)
	switch err {
	case nil:
		return nil
	case errRateRefused, errRateDeadline:
		if mx := m.metrics; mx != nil {
			mx.rateLimited.Inc()
		}
		p := &m.limiter.p
		why := fmt.Sprintf("%g calls/s, burst %d; a token in %s, ", p.RequestsPerSecond, p.Burst, wait.Round(time.Millisecond))
		if err == errRateDeadline {
			why += "after the call's deadline"
		} else {
			why += fmt.Sprintf("over the max wait %s", p.MaxWait)
		}
		return rateLimitedError(m.dependency(), m.policy.Name, wait, why)
	}
	return statusFromContext(err)
}
