package runtime

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/runtime/internal/window"
	"github.com/go-resilient/resilient/runtime/policy"
)

// budget is a retry budget: over a sliding window, the retries towards a
// dependency may not exceed Ratio times the requests plus MinRetries. Under
// a total outage it holds the load on the dependency to about (1 + Ratio)
// times the requests, where unbudgeted retries would multiply it by the
// number of attempts.
//
// A retry stays counted for more than the whole Window (window.NewLasting)
// and a request for at most the Window, so that no stretch of one Window
// holds more retries than Ratio times the requests of one Window plus
// MinRetries: with buckets of a tenth, a retry counted late in its bucket
// left 9/10 of the Window after it, and MinRetries could be spent twice in
// one Window.
//
// Counting a request takes no lock; deciding a retry takes the budget's
// mutex, so that concurrent retries can never overdraw it.
type budget struct {
	p    policy.Budget
	base time.Time
	w    *window.Time // a: requests, b: retries; read with SumSplit
	mu   sync.Mutex

	// The episode of exhaustion, for the events: from the first refusal
	// to the first call after a whole window without one. exhausted is
	// read lock-free by every call of a client with events; the rest is
	// guarded by emu, taken only on refusals and at the episode's end.
	exhausted   atomic.Bool
	emu         sync.Mutex
	began       int64 // when the episode began, nanoseconds since base
	lastRefusal int64
	refusals    int // retries refused in the episode
}

// newBudget returns an empty budget whose window counts from base.
func newBudget(p policy.Budget, base time.Time) *budget {
	return &budget{p: p, base: base, w: window.NewLasting(p.Window)}
}

// request counts one request (a call, not an attempt) at n, nanoseconds
// since base.
func (b *budget) request(n int64) { b.w.Add(n, 1, 0) }

// tryRetry reports whether one more retry fits in the budget at n, and if
// so counts it.
func (b *budget) tryRetry(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	requests, retries := b.w.SumSplit(n)
	if int64(retries)+1 > b.allowance(requests) {
		return false
	}
	b.w.Add(n, 0, 1)
	return true
}

// giveBack takes back a retry tryRetry counted at n that was then not
// sent: the open breaker or an adaptive layer refused it, or its call
// ended first. The budget bounds what reaches the dependency; a retry
// that never did leaves room for the next real one.
func (b *budget) giveBack(n int64) { b.w.Remove(n, 0, 1) }

// available returns how many retries the budget would allow at n.
func (b *budget) available(n int64) int {
	requests, retries := b.w.SumSplit(n)
	return int(max(0, b.allowance(requests)-int64(retries)))
}

// allowance returns how many retries the window may hold with requests in
// it: Ratio*requests, rounded down, plus MinRetries. A product that is an
// integer in exact arithmetic may fall just below it in float64
// (0.29*100 = 28.999999999999996); it is not rounded down a whole retry.
func (b *budget) allowance(requests uint64) int64 {
	x := b.p.Ratio * float64(requests)
	if r := math.Round(x); math.Abs(x-r) <= 1e-9*r {
		x = r
	}
	n := int64(x) // Ratio ≤ 1 (Validate): at most the requests in the window
	if floor := int64(b.p.MinRetries); n > math.MaxInt64-floor {
		return math.MaxInt64 // a floor as large as an int says "always"; never wrapped to "never"
	}
	return n + int64(b.p.MinRetries)
}

// refused notes a refusal at n in the episode of exhaustion, and reports
// whether it began one.
func (b *budget) refused(n int64) (began bool) {
	b.emu.Lock()
	defer b.emu.Unlock()
	b.lastRefusal = n
	b.refusals++
	if b.exhausted.Load() {
		return false
	}
	b.began, b.refusals = n, 1
	b.exhausted.Store(true)
	return true
}

// recovered ends the episode of exhaustion when no retry was refused for
// a whole window before n; it returns how long the episode lasted (to its
// last refusal) and how many retries it refused, ok false when it goes on.
func (b *budget) recovered(n int64) (lasted time.Duration, refusals int, ok bool) {
	b.emu.Lock()
	defer b.emu.Unlock()
	if !b.exhausted.Load() || n-b.lastRefusal < int64(b.p.Window) {
		return 0, 0, false
	}
	b.exhausted.Store(false)
	return time.Duration(b.lastRefusal - b.began), b.refusals, true
}

// budgetRefused counts a retry (or hedged copy) the budget refused and
// reports the refusal that begins an episode of exhaustion: one event,
// however many retries the episode refuses. err is what the caller is
// left with, nil when a hedged copy was refused before any copy failed.
func (m *methodState) budgetRefused(err error) {
	if m.metrics != nil {
		m.metrics.retries[retryBudget].Inc()
	}
	c := m.client
	if c.events == nil || !m.budget.refused(c.now()) {
		return
	}
	cause := ""
	if err != nil {
		cause = strings.ToLower(codename.Of(status.Code(err)))
	}
	c.events.emit(Event{Kind: EventBudgetExhausted, Dependency: m.dependency(), Method: m.policy.Name, Cause: cause, Err: err})
}

// budgetRecovered reports the end of the budget's episode of exhaustion
// at the first call after a whole window without a refusal. A call that
// finds no episode pays one atomic load.
func (m *methodState) budgetRecovered() {
	b := m.budget
	if !b.exhausted.Load() {
		return
	}
	c := m.client
	lasted, refusals, ok := b.recovered(c.now())
	if !ok {
		return
	}
	c.events.emit(Event{Kind: EventBudgetRecovered, Dependency: m.dependency(), Method: m.policy.Name,
		Cause: fmt.Sprintf("no retry refused for %s; %d refused over %s", b.p.Window, refusals, lasted.Round(time.Millisecond))})
}
