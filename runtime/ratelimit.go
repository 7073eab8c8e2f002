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
	// mu serializes every use of lim, each with the time read once mu is
	// held, so that lim sees its times in order and no reservation is made
	// between a refused call's reservation and its cancellation:
	//   - x/time/rate takes a time earlier than the last it saw as that
	//     earlier moment, and a reservation moves its clock back to it:
	//     with the time read before waiting for lim's lock, a refused
	//     call moved the clock back by as long as it had waited for the
	//     lock, and the next call was given that time's refill again.
	//     Under contention the bucket let through several times its rate
	//     (128 callers in a loop, burst 5 at 20/s: 48 to 158 calls in
	//     600 ms where 18 were allowed,
	//     TestAttack25cSustainedStormAdmitsNoMoreThanTheRate);
	//   - a cancellation gives back only what no later reservation
	//     depends on: a refusal cancelled after another caller's
	//     reservation gave back nothing, and a storm of refusals left the
	//     bucket tokens in debt (TestAttack25cRefusedStormLeavesTheBucketWhole).
	// A wait for a token is made without mu.
	mu sync.Mutex
}

// newRateLimiter returns a limiter whose bucket starts full.
func newRateLimiter(p policy.RateLimit) *rateLimiter {
	return &rateLimiter{p: p, lim: rate.NewLimiter(rate.Limit(p.RequestsPerSecond), p.Burst)}
}

// take takes a token for one call. It returns at once when a token is
// there; otherwise it waits for one if the wait fits in the policy's
// MaxWait and before ctx's deadline, and else refuses at once, giving the
// token back, with how long the call would have had to wait. A wait that
// ctx ends early gives the token back too (what no later reservation
// depends on), and returns ctx's error.
func (r *rateLimiter) take(ctx context.Context) (wait time.Duration, err error) {
	res, wait, err := r.reserve(ctx)
	if res == nil || err != nil {
		return wait, err
	}
	if !sleep(ctx, wait) {
		r.mu.Lock()
		res.CancelAt(time.Now())
		r.mu.Unlock()
		return wait, ctx.Err()
	}
	return wait, nil
}

// reserve decides, under r.mu, what take does: go at once (no
// reservation), refuse (the reservation given back), or wait for the
// reservation it returns.
func (r *rateLimiter) reserve(ctx context.Context) (_ *rate.Reservation, wait time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.lim.AllowN(now, 1) {
		return nil, 0, nil // a token was there: no reservation to allocate
	}
	res := r.lim.ReserveN(now, 1)
	if !res.OK() {
		return nil, 0, errRateRefused
	}
	switch wait = res.DelayFrom(now); {
	case wait == 0:
		return nil, 0, nil
	case wait > r.p.MaxWait:
		err = errRateRefused
	default:
		if dl, ok := ctx.Deadline(); ok && dl.Sub(now) <= wait {
			err = errRateDeadline
		}
	}
	if err != nil {
		res.CancelAt(now)
		return nil, wait, err
	}
	return res, wait, nil
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
