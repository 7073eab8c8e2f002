package runtime

import (
	"context"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// RateLimitPolicy configures a token bucket on the calls a client sends to
// a dependency.
type RateLimitPolicy struct {
	// RequestsPerSecond is the sustained rate of calls; must be positive
	// and finite.
	RequestsPerSecond float64
	// Burst is the number of calls that may go at once after a quiet spell;
	// at least 1.
	Burst int
	// MaxWait is how long a call may wait for a token, never past its
	// deadline; 0 refuses at once.
	MaxWait time.Duration
}

func (r *RateLimitPolicy) check(f string, bad badFunc) {
	if x := r.RequestsPerSecond; math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
		bad(f+".RequestsPerSecond", "must be a positive, finite number, got %v; it is the sustained rate of calls allowed", x)
	}
	if r.Burst < 1 {
		bad(f+".Burst", "must be at least 1, got %d", r.Burst)
	}
	if r.MaxWait < 0 {
		bad(f+".MaxWait", "must not be negative, got %s; use 0 to refuse a call at once when no token is left", r.MaxWait)
	}
}

// rateLimiter is a client's token bucket towards one dependency, on
// golang.org/x/time/rate: the standard, well-tested token bucket, whose
// reservations let a call know how long it would wait before it waits.
type rateLimiter struct {
	p   RateLimitPolicy
	lim *rate.Limiter
}

// newRateLimiter returns a limiter whose bucket starts full.
func newRateLimiter(p RateLimitPolicy) *rateLimiter {
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
	res := r.lim.ReserveN(now, 1)
	if !res.OK() {
		return 0, errRateRefused
	}
	wait = res.DelayFrom(now)
	if wait == 0 {
		return 0, nil
	}
	if wait > r.p.MaxWait {
		res.CancelAt(now)
		return wait, errRateRefused
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) <= wait {
		res.CancelAt(now)
		return wait, errRateDeadline
	}
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
