package runtime

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// drain takes retries at now until the budget refuses one, and returns how
// many it granted. It checks that available announced that number.

// requestAt, tryRetryAt and availableAt drive a budget with instants
// instead of clock readings, for the tests.
func (b *budget) requestAt(now time.Time)       { b.request(nanos(now, b.base)) }
func (b *budget) tryRetryAt(now time.Time) bool { return b.tryRetry(nanos(now, b.base)) }
func (b *budget) availableAt(now time.Time) int { return b.available(nanos(now, b.base)) }

func drain(t *testing.T, b *budget, now time.Time) int {
	t.Helper()
	avail := b.availableAt(now)
	n := 0
	for b.tryRetryAt(now) {
		n++
		if n > 1_000_000 {
			t.Fatal("the budget never runs out")
		}
	}
	if avail != n {
		t.Errorf("Available said %d, TryRetry granted %d", avail, n)
	}
	if a := b.availableAt(now); a != 0 {
		t.Errorf("Available after draining = %d, want 0", a)
	}
	return n
}

func TestBudgetFloorWithoutRequests(t *testing.T) {
	b := newBudget(policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second}, t0)
	if got := drain(t, b, t0.Add(time.Second)); got != 10 {
		t.Fatalf("granted %d retries with no requests, want 10", got)
	}
}

func TestBudgetRatioOfRequests(t *testing.T) {
	for _, tc := range []struct {
		ratio      float64
		minRetries int
		requests   int
		want       int
	}{
		{0.1, 10, 100, 20},
		{0.1, 10, 9, 10},   // 0.9 of a retry earned: none yet
		{0.1, 10, 10, 11},  //
		{0.1, 10, 105, 20}, // rounded down
		{0.5, 0, 7, 3},
		{1, 0, 5, 5},
		{0.29, 0, 100, 29}, // 0.29*100 is 28.999999999999996 in float64
		{0.57, 1, 100, 58},
		{0.3, 0, 10, 3},
	} {
		t.Run(fmt.Sprintf("%v,%d,%d", tc.ratio, tc.minRetries, tc.requests), func(t *testing.T) {
			b := newBudget(policy.Budget{Ratio: tc.ratio, MinRetries: tc.minRetries, Window: 10 * time.Second}, t0)
			now := t0.Add(time.Second)
			for range tc.requests {
				b.requestAt(now)
			}
			if got := drain(t, b, now); got != tc.want {
				t.Fatalf("granted %d retries, want %d", got, tc.want)
			}
		})
	}
}

func TestBudgetEarnsRetriesAsRequestsCome(t *testing.T) {
	b := newBudget(policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second}, t0)
	now := t0.Add(time.Second)
	drain(t, b, now)
	for i := 1; i <= 30; i++ {
		b.requestAt(now)
		want := i%10 == 0 // every 10th request earns one retry
		if got := b.tryRetryAt(now); got != want {
			t.Fatalf("after %d requests TryRetry = %v, want %v", i, got, want)
		}
	}
}

func TestBudgetWindowSlides(t *testing.T) {
	b := newBudget(policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second}, t0)
	start := t0.Add(time.Second)
	for range 100 {
		b.requestAt(start)
	}
	for range 10 {
		if !b.tryRetryAt(start) {
			t.Fatal("retry refused")
		}
	}
	mid := start.Add(5 * time.Second)
	if got := drain(t, b, mid); got != 10 {
		t.Fatalf("granted %d more at +5s, want 10", got)
	}
	// At +11 s the requests have left the window, but the retries of +5 s
	// are still in it: 20 retries already against a floor of 10.
	if got := b.availableAt(start.Add(11 * time.Second)); got != 0 {
		t.Fatalf("Available at +11s = %d, want 0", got)
	}
	// At +16 s everything has expired: the floor again.
	if got := drain(t, b, start.Add(16*time.Second)); got != 10 {
		t.Fatalf("granted %d at +16s, want 10", got)
	}
	// And requests made later count afresh.
	late := start.Add(17 * time.Second)
	for range 50 {
		b.requestAt(late)
	}
	if got := drain(t, b, late); got != 5 {
		t.Fatalf("granted %d at +17s, want 5", got)
	}
}

func TestBudgetConcurrentRetriesNeverOverdraw(t *testing.T) {
	b := newBudget(policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second}, t0)
	now := t0.Add(time.Second)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { b.requestAt(now) })
	}
	wg.Wait()
	if got := b.availableAt(now); got != 20 {
		t.Fatalf("Available = %d, want 20", got)
	}
	var granted atomic.Int64
	start := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-start
			for range 10 {
				if b.tryRetryAt(now) {
					granted.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := granted.Load(); got != 20 {
		t.Fatalf("64 goroutines were granted %d retries, want exactly 20", got)
	}
	if got := b.availableAt(now); got != 0 {
		t.Fatalf("Available = %d, want 0", got)
	}
}

func TestBudgetConcurrentRequestsAndRetries(t *testing.T) {
	// Requests and retries race; at every grant the retries must fit the
	// requests counted so far. At the end the total fits the final budget.
	b := newBudget(policy.Budget{Ratio: 0.2, MinRetries: 5, Window: 10 * time.Second}, t0)
	now := t0.Add(time.Second)
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 100 {
				b.requestAt(now)
			}
		})
		wg.Go(func() {
			for range 100 {
				if b.tryRetryAt(now) {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if max := int64(0.2*3200 + 5); granted.Load() > max {
		t.Fatalf("granted %d retries, more than %d", granted.Load(), max)
	}
	if got, want := int64(b.availableAt(now)), int64(0.2*3200+5)-granted.Load(); got != want {
		t.Fatalf("Available = %d, want %d", got, want)
	}
}

// TestBudgetWalkthrough spends a budget: a quiet client's floor, the
// allowance that 100 requests add, all of it granted, and the window
// emptied 11 s later.
func TestBudgetWalkthrough(t *testing.T) {
	var out strings.Builder
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBudget(policy.Budget{Ratio: 0.1, MinRetries: 10, Window: 10 * time.Second}, base)
	now := base.Add(time.Second)
	fmt.Fprintln(&out, "quiet client:", b.availableAt(now), "retries")
	for range 100 {
		b.requestAt(now)
	}
	fmt.Fprintln(&out, "after 100 requests:", b.availableAt(now), "retries")
	granted := 0
	for b.tryRetryAt(now) {
		granted++
	}
	fmt.Fprintln(&out, "granted:", granted)
	fmt.Fprintln(&out, "11 s later:", b.availableAt(now.Add(11*time.Second)), "retries")
	const want = `quiet client: 10 retries
after 100 requests: 20 retries
granted: 20
11 s later: 10 retries
`
	if got := out.String(); got != want {
		t.Errorf("walkthrough printed\n%s\nwant\n%s", got, want)
	}
}

// TestBudgetSpendsItsFloorOncePerWindow: over any stretch of one window, a
// budget without requests grants MinRetries and no more, wherever in a
// bucket the retries fell. Before, its buckets were a tenth of the window
// and a retry counted late in one left 9/10 of a window after it: with a
// 10 s window, 3 retries at 0.99 s and 3 more at 10.0 s, 9.01 s later.
func TestBudgetSpendsItsFloorOncePerWindow(t *testing.T) {
	const window = 10 * time.Second
	for _, first := range []time.Duration{0, 990 * time.Millisecond, 1110 * time.Millisecond, 4321 * time.Millisecond} {
		b := newBudget(policy.Budget{Ratio: 0.1, MinRetries: 3, Window: window}, t0)
		if got := drain(t, b, t0.Add(first)); got != 3 {
			t.Fatalf("first at %v: granted %d, want the floor of 3", first, got)
		}
		for at := first; at <= first+window; at += 10 * time.Millisecond {
			if b.tryRetryAt(t0.Add(at)) {
				t.Fatalf("retries at %v spent the floor again at %v, %v later: within one window of %v",
					first, at, at-first, window)
			}
		}
		if got := drain(t, b, t0.Add(first+window*10/9+time.Millisecond)); got != 3 {
			t.Fatalf("first at %v: granted %d a ninth of a window after the window, want the floor again", first, got)
		}
	}
}

// TestBudgetRequestsLeaveWithTheWindow: a request earns retries for at
// most one window, so that no stretch of a window holds more retries than
// the ratio of one window's requests and the floor.
func TestBudgetRequestsLeaveWithTheWindow(t *testing.T) {
	const window = 10 * time.Second
	b := newBudget(policy.Budget{Ratio: 0.5, MinRetries: 0, Window: window}, t0)
	for range 10 {
		b.requestAt(t0)
	}
	if got := b.availableAt(t0.Add(window - 2*time.Second)); got != 5 {
		t.Fatalf("available %v later = %d, want 5", window-2*time.Second, got)
	}
	if got := b.availableAt(t0.Add(window + time.Millisecond)); got != 0 {
		t.Fatalf("available just after the window = %d, want 0: the requests earn no more", got)
	}
}
