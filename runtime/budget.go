package runtime

import (
	"math"
	"sync"
	"time"
)

// Budget is a retry budget: over a sliding window, the retries towards a
// dependency may not exceed Ratio times the requests plus MinRetries. Under
// a total outage it holds the load on the dependency to about (1 + Ratio)
// times the requests, where unbudgeted retries would multiply it by the
// number of attempts.
//
// Counting a request takes no lock; deciding a retry takes the budget's
// mutex, so that concurrent retries can never overdraw it.
type Budget struct {
	p    BudgetPolicy
	base time.Time
	w    *window // a: requests, b: retries
	mu   sync.Mutex
}

// NewBudget returns an empty budget whose window counts from base.
func NewBudget(p BudgetPolicy, base time.Time) *Budget {
	return &Budget{p: p, base: base, w: newWindow(p.Window)}
}

// Request counts one request (a call, not an attempt) at now.
func (b *Budget) Request(now time.Time) { b.request(nanos(now, b.base)) }

func (b *Budget) request(n int64) { b.w.add(n, 1, 0) }

// TryRetry reports whether one more retry fits in the budget at now, and if
// so counts it.
func (b *Budget) TryRetry(now time.Time) bool { return b.tryRetry(nanos(now, b.base)) }

func (b *Budget) tryRetry(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	requests, retries := b.w.sum(n)
	if int64(retries)+1 > b.allowance(requests) {
		return false
	}
	b.w.add(n, 0, 1)
	return true
}

// Available returns how many retries the budget would allow at now.
func (b *Budget) Available(now time.Time) int {
	requests, retries := b.w.sum(nanos(now, b.base))
	return int(max(0, b.allowance(requests)-int64(retries)))
}

// allowance returns how many retries the window may hold with requests in
// it: Ratio*requests, rounded down, plus MinRetries. A product that is an
// integer in exact arithmetic may fall just below it in float64
// (0.29*100 = 28.999999999999996); it is not rounded down a whole retry.
func (b *Budget) allowance(requests uint64) int64 {
	x := b.p.Ratio * float64(requests)
	if r := math.Round(x); math.Abs(x-r) <= 1e-9*r {
		x = r
	}
	return int64(x) + int64(b.p.MinRetries)
}
