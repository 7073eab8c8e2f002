package runtime

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// fakeBucket is a rateLimiter on a clock of the test's: its timer is
// recorded, not armed, and the test runs serve when it chooses.
type fakeBucket struct {
	*rateLimiter
	now   time.Time
	armed time.Duration // the last arming; 0 for none
}

func newFakeBucket(p policy.RateLimit) *fakeBucket {
	f := &fakeBucket{now: time.Unix(1e9, 0)}
	f.rateLimiter = &rateLimiter{p: p, tokens: float64(p.Burst), last: f.now}
	f.arm = func(d time.Duration) { f.armed = d }
	return f
}

func (f *fakeBucket) admit(t *testing.T, ctx context.Context) (*rateWaiter, time.Duration, error) {
	t.Helper()
	return f.rateLimiter.admit(ctx, f.now)
}

// after moves the clock on by d and, if the timer is due, runs it.
func (f *fakeBucket) after(d time.Duration) {
	f.now = f.now.Add(d)
	if f.armed > 0 && d >= f.armed {
		f.armed = 0
		f.serve(f.now)
	} else if f.armed > 0 {
		f.armed -= d
	}
}

func granted(w *rateWaiter) bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// TestBucketServesWaitersInOrderAndGivesALeaversPlaceOn: a bucket of 1 at
// 10/s that lets calls wait 1 s. The first call takes the token; the next
// three wait 100, 200 and 300 ms, each told so. The second leaves: the
// third has its token at 100 ms and the fourth at 200 ms, in the order
// they came; a fifth call, behind them, waits for the token after that.
func TestBucketServesWaitersInOrderAndGivesALeaversPlaceOn(t *testing.T) {
	f := newFakeBucket(policy.RateLimit{RequestsPerSecond: 10, Burst: 1, MaxWait: time.Second})
	ctx := context.Background()
	if w, _, err := f.admit(t, ctx); w != nil || err != nil {
		t.Fatalf("first call: waiter %v, %v; want the token at once", w, err)
	}
	var ws []*rateWaiter
	for i, want := range []time.Duration{100, 200, 300} {
		w, wait, err := f.admit(t, ctx)
		if w == nil || err != nil || wait != want*time.Millisecond {
			t.Fatalf("call %d: waiter %v, wait %v, %v; want to wait %v", i+2, w, wait, err, want*time.Millisecond)
		}
		ws = append(ws, w)
	}
	if f.armed != 100*time.Millisecond {
		t.Errorf("timer armed for %v, want the head's 100ms", f.armed)
	}
	f.after(10 * time.Millisecond)
	f.leave(ws[0], f.now)
	f.after(90 * time.Millisecond)
	if granted(ws[0]) || !granted(ws[1]) || granted(ws[2]) {
		t.Fatalf("at 100ms: granted %v %v %v, want only the third call's (the second left)", granted(ws[0]), granted(ws[1]), granted(ws[2]))
	}
	if _, wait, _ := f.admit(t, ctx); wait != 200*time.Millisecond {
		t.Errorf("a call at 100ms behind one waiter waits %v, want 200ms", wait)
	}
	f.after(100 * time.Millisecond)
	if !granted(ws[2]) {
		t.Error("at 200ms the fourth call has no token")
	}
	if len(f.queue) != 1 {
		t.Errorf("%d calls queued, want the fifth", len(f.queue))
	}
}

// TestBucketTakesBackATokenItsCallerLeft: a call given its token as its
// caller gave up gives the token back, to the next in the queue or, with
// nobody waiting, to the bucket (never above Burst).
func TestBucketTakesBackATokenItsCallerLeft(t *testing.T) {
	f := newFakeBucket(policy.RateLimit{RequestsPerSecond: 10, Burst: 2, MaxWait: time.Second})
	ctx := context.Background()
	for range 2 {
		f.admit(t, ctx)
	}
	a, _, _ := f.admit(t, ctx)
	b, _, _ := f.admit(t, ctx)
	f.after(100 * time.Millisecond) // a has its token
	if !granted(a) || granted(b) {
		t.Fatal("at 100ms the first waiter has no token, or the second has one")
	}
	f.leave(a, f.now) // its caller left as it was given it
	if !granted(b) {
		t.Error("the token the first waiter's caller left did not go to the next")
	}
	f.leave(b, f.now)
	if f.tokens != 1 {
		t.Errorf("the bucket holds %v tokens, want the 1 given back", f.tokens)
	}
	f.after(time.Hour)
	f.refill(f.now)
	if f.tokens != 2 {
		t.Errorf("after an hour the bucket holds %v tokens, want its burst of 2", f.tokens)
	}
}

// TestBucketRefusesWhatComesTooLate: a call whose token comes after
// MaxWait, or not before its deadline, is refused at once, with the wait
// it would have had, and takes no place in the queue; MaxWait 0 refuses
// every call that would wait.
func TestBucketRefusesWhatComesTooLate(t *testing.T) {
	f := newFakeBucket(policy.RateLimit{RequestsPerSecond: 10, Burst: 1, MaxWait: 150 * time.Millisecond})
	ctx := context.Background()
	f.admit(t, ctx)
	f.admit(t, ctx) // waits 100ms
	if w, wait, err := f.admit(t, ctx); w != nil || err != errRateRefused || wait != 200*time.Millisecond {
		t.Errorf("a call 200ms away with a max wait of 150ms: %v, %v, %v; want refused, 200ms", w, wait, err)
	}
	dctx, cancel := context.WithDeadline(ctx, f.now.Add(150*time.Millisecond))
	defer cancel()
	f.queue = f.queue[:0]
	f.tokens = 0
	if _, _, err := f.admit(t, dctx); err != nil {
		t.Errorf("a call 100ms away with 150ms to its deadline: %v", err)
	}
	if _, _, err := f.admit(t, dctx); err != errRateRefused && err != errRateDeadline {
		t.Errorf("a call 200ms away with 150ms to its deadline: %v, want refused", err)
	}
	if len(f.queue) != 1 {
		t.Errorf("%d queued, want only the call that may wait", len(f.queue))
	}
	z := newFakeBucket(policy.RateLimit{RequestsPerSecond: 1e9, Burst: 1})
	z.admit(t, ctx)
	if w, _, err := z.admit(t, ctx); w != nil || err != errRateRefused {
		t.Errorf("max wait 0: %v, %v; want refused", w, err)
	}
}

// TestBucketAtTheExtremes: a rate as small as a float64 is waits the
// longest Duration, not a negative one; a huge rate after a long gap
// refills to Burst, not to Inf.
func TestBucketAtTheExtremes(t *testing.T) {
	f := newFakeBucket(policy.RateLimit{RequestsPerSecond: math.SmallestNonzeroFloat64, Burst: 1, MaxWait: time.Hour})
	f.admit(t, context.Background())
	if _, wait, err := f.admit(t, context.Background()); err != errRateRefused || wait != math.MaxInt64 {
		t.Errorf("a rate of %g: wait %v, %v; want the longest Duration, refused", math.SmallestNonzeroFloat64, wait, err)
	}
	g := newFakeBucket(policy.RateLimit{RequestsPerSecond: math.MaxFloat64, Burst: 3})
	g.tokens = 0
	g.after(math.MaxInt64)
	g.refill(g.now)
	if g.tokens != 3 {
		t.Errorf("a huge rate after a long gap holds %v tokens, want its burst of 3", g.tokens)
	}
}

// BenchmarkRateLimitTake is a call's token from a bucket that never runs
// dry: the cost a rate limit adds to every call of a method that has one.
func BenchmarkRateLimitTake(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		r := newRateLimiter(policy.RateLimit{RequestsPerSecond: 1e12, Burst: 1 << 30})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.take(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		r := newRateLimiter(policy.RateLimit{RequestsPerSecond: 1e12, Burst: 1 << 30})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.take(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
