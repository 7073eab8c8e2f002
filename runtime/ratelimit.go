package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/go-resilient/resilient/runtime/policy"
)

// rateLimiter is a client's token bucket towards one dependency, on
// golang.org/x/time/rate: the standard, well-tested token bucket, whose
// reservations let a call know how long it would wait before it waits.
type rateLimiter struct {
	p   policy.RateLimit
	lim *rate.Limiter
	// reserving serializes the reservations of the calls that found no
	// token, from the reservation to the decision to wait or refuse: a
	// refused call cancels its reservation before any other is made, so
	// that it gives back its whole token. x/time/rate gives back only what
	// no later reservation depends on: a refusal cancelled after another
	// caller's reservation gave back nothing, and a storm of concurrent
	// refusals left the bucket tokens in debt, refusing the calls after it
	// for seconds (TestAttack25cRefusedStormLeavesTheBucketWhole). A call
	// that finds a token takes no lock but the limiter's.
	reserving sync.Mutex
}

// newRateLimiter returns a limiter whose bucket starts full.
func newRateLimiter(p policy.RateLimit) *rateLimiter {
	return &rateLimiter{p: p, lim: rate.NewLimiter(rate.Limit(p.RequestsPerSecond), p.Burst)}
}

// take takes a token for one call. It returns at once when a token is
// there; otherwise it waits for one if the wait fits in the policy's
// MaxWait and before ctx's deadline, and else refuses at once, giving the
// token back, with how long the call would have had to wait. A wait that
// ctx ends early gives the token back too, and returns ctx's error.
func (r *rateLimiter) take(ctx context.Context) (wait time.Duration, err error) {
	now := time.Now()
	if r.lim.AllowN(now, 1) {
		return 0, nil // a token was there: no reservation to allocate
	}
	r.reserving.Lock()
	now = time.Now() // not the moment before the wait for the lock
	res := r.lim.ReserveN(now, 1)
	if !res.OK() {
		r.reserving.Unlock()
		return 0, errRateRefused
	}
	wait = res.DelayFrom(now)
	if wait == 0 {
		r.reserving.Unlock()
		return 0, nil
	}
	if wait > r.p.MaxWait {
		res.CancelAt(now)
		r.reserving.Unlock()
		return wait, errRateRefused
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) <= wait {
		res.CancelAt(now)
		r.reserving.Unlock()
		return wait, errRateDeadline
	}
	r.reserving.Unlock()
	if !sleep(ctx, wait) {
		res.Cancel()
		return wait, ctx.Err()
	}
	return wait, nil
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
