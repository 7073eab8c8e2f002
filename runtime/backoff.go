package runtime

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// backoffFor returns how long to wait before retry number n (1 for the first
// retry) under p: a duration drawn uniformly from [0, bound), where the bound
// starts at InitialBackoff, grows by Multiplier per retry and never exceeds
// MaxBackoff ("full jitter"). Spreading the waits over the whole interval
// keeps clients that failed together from retrying together.
func backoffFor(p *policy.Retry, n int) time.Duration {
	return jitter(backoffBound(p, n))
}

// backoffBound is the upper bound of the wait before retry n.
func backoffBound(p *policy.Retry, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	bound := float64(p.InitialBackoff) * math.Pow(max(p.Multiplier, 1), float64(n-1))
	// >=, not >: float64(MaxBackoff) may round up (to 2^63 for the largest
	// durations), and converting a bound that reaches it would overflow.
	if bound >= float64(p.MaxBackoff) || math.IsInf(bound, 0) || math.IsNaN(bound) {
		return p.MaxBackoff
	}
	return time.Duration(bound)
}

func jitter(bound time.Duration) time.Duration {
	if bound <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(bound)))
}
