package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
)

// The clock reads of an attempt: which ones the hot path skips, and that
// the time each outcome is counted at stays within the window's precision.

// noClock is a now func for doneEarly that fails the test if read.
func noClock(t *testing.T) func() int64 {
	return func() int64 {
		t.Helper()
		t.Fatal("the clock was read")
		return 0
	}
}

func TestBreakerDoneEarlyCountsInTheBucketOfTheReading(t *testing.T) {
	b, _ := newTestBreaker(testBreakerPolicy()) // 1 s buckets
	at := t0.Add(2500 * time.Millisecond)
	tk, _, ok := b.allowAt(at)
	if !ok {
		t.Fatal("refused")
	}
	if !b.doneEarly(tk, nanos(at, t0), noClock(t)) {
		t.Fatal("doneEarly declined a success on a closed breaker")
	}
	// Counted in the bucket of 2 s: seen until the window has moved past it.
	for _, c := range []struct {
		at   time.Duration
		want uint64
	}{{2500 * time.Millisecond, 1}, {12*time.Second - 1, 1}, {12 * time.Second, 0}} {
		if calls, _ := b.outcomes.Sum(int64(c.at)); calls != c.want {
			t.Errorf("window at %v holds %d calls, want %d", c.at, calls, c.want)
		}
	}
}

// TestBreakerDoneEarlyJudgesAtTheExactTime: with a failure in the window,
// a success counted early still judges the ratio, at the time now() gives,
// and the cool-down runs from then, not from the early reading.
func TestBreakerDoneEarlyJudgesAtTheExactTime(t *testing.T) {
	b, tr := newTestBreaker(testBreakerPolicy()) // 10 calls, ratio 0.5, cool-down 5 s
	at := t0.Add(time.Second)
	for range 5 {
		call(t, b, at, outcomeFailure)
	}
	exact := t0.Add(1900 * time.Millisecond)
	reads := 0
	now := func() int64 { reads++; return nanos(exact, t0) }
	for i := range 5 {
		tk, _, ok := b.allowAt(at)
		if !ok {
			t.Fatalf("success %d refused", i)
		}
		if !b.doneEarly(tk, nanos(t0.Add(1200*time.Millisecond), t0), now) {
			t.Fatalf("success %d declined", i)
		}
	}
	if reads != 5 {
		t.Errorf("now() read %d times, want once per success while a failure is in the window", reads)
	}
	wantTransitions(t, tr, "closed->open")
	wantState(t, b, exact.Add(5*time.Second-time.Nanosecond), StateOpen)
	wantState(t, b, exact.Add(5*time.Second), StateHalfOpen)
}

// TestBreakerDoneEarlyLeavesTheRestToDone: probes, bystanders and calls
// judged by their latency need the exact end; doneEarly records none of
// them. A ticket of an earlier state is dropped, as done drops it.
func TestBreakerDoneEarlyLeavesTheRestToDone(t *testing.T) {
	b, _ := newTestBreaker(testBreakerPolicy())
	openBreaker(t, b, t0)
	half := t0.Add(6 * time.Second)
	probe, _, ok := b.allowAt(half)
	if !ok || !probe.probe {
		t.Fatalf("no probe at %s", half.Sub(t0))
	}
	if b.doneEarly(probe, nanos(half, t0), noClock(t)) {
		t.Error("doneEarly took a probe's outcome")
	}
	bystander, _, ok := b.allow(func() int64 { return nanos(half, t0) }, false)
	if !ok || !bystander.bystander {
		t.Fatal("no bystander")
	}
	if b.doneEarly(bystander, nanos(half, t0), noClock(t)) {
		t.Error("doneEarly took a bystander's outcome")
	}
	wantState(t, b, half, StateHalfOpen)

	p := testBreakerPolicy()
	p.SlowCallThreshold = time.Second
	slow, _ := newTestBreaker(p)
	tk, _, _ := slow.allowAt(t0)
	if slow.doneEarly(tk, 0, noClock(t)) {
		t.Error("doneEarly took an outcome judged by its latency")
	}

	stale, _ := newTestBreaker(testBreakerPolicy())
	old, _, _ := stale.allowAt(t0)
	openBreaker(t, stale, t0)
	if !stale.doneEarly(old, 0, noClock(t)) {
		t.Error("doneEarly declined a stale ticket")
	}
	if calls, _ := stale.outcomes.Sum(0); calls != uint64(stale.p.MinimumCalls) {
		t.Errorf("window holds %d calls, want only the %d failures", calls, stale.p.MinimumCalls)
	}
}

// timedMethod builds a method with a breaker whose buckets are width long
// and the given attempt timeout, on the system clock.
func timedMethod(t *testing.T, width, timeout time.Duration, opts ...Option) *Method {
	t.Helper()
	c, err := NewClient(&policy.Service{
		Name: "resilient.test.Timed",
		Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 10, Window: 10 * width, CoolDown: time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable)},
		Methods: []policy.Method{{Name: "/resilient.test.Timed/Get", Timeout: timeout}},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c.Method(0)
}

type timedReq struct{}

// sleepy answers after d, whatever its context says.
func sleepy(d time.Duration) func(context.Context, *timedReq, ...grpc.CallOption) (*timedReq, error) {
	return func(context.Context, *timedReq, ...grpc.CallOption) (*timedReq, error) {
		time.Sleep(d)
		return &timedReq{}, nil
	}
}

// countedAt returns the bucket (the epoch, in bucket widths since the
// client's base) of the one call m's breaker holds: the window sees a call
// from its bucket's start until ten buckets later.
func countedAt(t *testing.T, m *Method) int64 {
	t.Helper()
	w := int64(m.breaker.outcomes.BucketWidth())
	cur := m.client.now() / w
	if calls, _ := m.breaker.outcomes.Sum(cur * w); calls != 1 {
		t.Fatalf("the window holds %d calls, want 1", calls)
	}
	for q := cur + 1; q <= cur+20; q++ {
		if calls, _ := m.breaker.outcomes.Sum(q * w); calls == 0 {
			return q - 10
		}
	}
	t.Fatal("the call never leaves the window")
	return 0
}

// TestAttemptCountedWithinABucketOfItsEnd: whatever reading an attempt's
// success is counted at, it lies in the bucket of its end or the one
// before. The two cases where the start would be further off are counted
// at the exact end: an attempt that outlasted its deadline (the call
// ignored it), and a timeout longer than a bucket.
func TestAttemptCountedWithinABucketOfItsEnd(t *testing.T) {
	const width = 20 * time.Millisecond
	cases := []struct {
		name           string
		timeout, sleep time.Duration
	}{
		{"timeout within a bucket, answered in time", width, 0},
		{"timeout within a bucket, answered past its deadline", width, 4 * width},
		{"timeout longer than a bucket", 10 * width, 4 * width},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := timedMethod(t, width, c.timeout)
			before := m.client.now()
			if _, err := Unary(context.Background(), m, "", &timedReq{}, nil, sleepy(c.sleep), nil); err != nil {
				t.Fatal(err)
			}
			after := m.client.now()
			got := countedAt(t, m)
			lo := (before+int64(c.sleep))/int64(width) - 1
			hi := after / int64(width)
			if got < lo || got > hi {
				t.Errorf("counted in bucket %d, want %d…%d (the end's bucket or the one before)", got, lo, hi)
			}
		})
	}
}

// readingCall is a call of m that stores the client's clock reading at
// its start in *inCall, takes 5 ms, and returns err, or a response if err
// is nil.
func readingCall(m *Method, inCall *int64, err error) func(context.Context, *timedReq, ...grpc.CallOption) (*timedReq, error) {
	return func(context.Context, *timedReq, ...grpc.CallOption) (*timedReq, error) {
		*inCall = m.client.now()
		time.Sleep(5 * time.Millisecond)
		if err != nil {
			return nil, err
		}
		return &timedReq{}, nil
	}
}

// wantSuccessCountedAtItsStart runs one successful attempt of m and fails
// the test unless the reading it hands on (for the breaker, the budget and
// the metrics) is the attempt's start, taken before the call began.
func wantSuccessCountedAtItsStart(t *testing.T, m *Method) {
	t.Helper()
	var inCall int64
	call := readingCall(m, &inCall, nil)
	_, end, err := attemptOnce(context.Background(), m, &invocation[timedReq, timedReq]{req: &timedReq{}, call: call}, false)
	if err != nil {
		t.Fatal(err)
	}
	if at := end.at; at == 0 || at > inCall {
		t.Errorf("the attempt handed on %dns, want its start, before the call began at %dns", at, inCall)
	}
}

// TestAttemptSuccessReadsNoClockAtItsEnd: a success on a closed breaker,
// with a timeout within a bucket, is counted at the reading its timeout
// was counted from (the reading attemptOnce hands on for the retry budget),
// not at a new reading after the call.
func TestAttemptSuccessReadsNoClockAtItsEnd(t *testing.T) {
	m := timedMethod(t, time.Second, time.Second)
	wantSuccessCountedAtItsStart(t, m)
	// A failure is counted at its exact end: the cool-down runs from it.
	var inCall int64
	fail := readingCall(m, &inCall, status.Error(codes.Unavailable, "down"))
	_, end, err := attemptOnce(context.Background(), m, &invocation[timedReq, timedReq]{req: &timedReq{}, call: fail}, false)
	if status.Code(err) != codes.Unavailable {
		t.Fatal(err)
	}
	if at := end.at; at < inCall+int64(5*time.Millisecond) {
		t.Errorf("failure counted at %dns, want its end, after %dns", at, inCall+int64(5*time.Millisecond))
	}
}

// TestRetryBudgetCountsARequestAtItsStart: without a breaker or metrics,
// the retry budget still takes the first attempt's start, read with its
// context, rather than a reading of its own.
func TestRetryBudgetCountsARequestAtItsStart(t *testing.T) {
	c, err := NewClient(&policy.Service{
		Name: "resilient.test.Timed",
		Methods: []policy.Method{{Name: "/resilient.test.Timed/Get", Idempotent: true, Timeout: time.Second,
			Retry: &policy.Retry{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
				Multiplier: 2, RetryableCodes: policy.CodesOf(codes.Unavailable)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Method(0)
	wantSuccessCountedAtItsStart(t, m)
	call := readingCall(m, new(int64), nil)
	if _, err := Unary(context.Background(), m, "", &timedReq{}, nil, call, nil); err != nil {
		t.Fatal(err)
	}
	if requests, _ := m.budget.w.Sum(m.client.now()); requests != 1 {
		t.Errorf("the budget counted %d requests, want 1", requests)
	}
}

// TestAttemptDurationFromItsOwnStart: the attempt-duration metric runs
// from the reading the attempt's timeout was counted from, on the system
// clock, and from the fake clock's readings under WithClock.
func TestAttemptDurationFromItsOwnStart(t *testing.T) {
	sum := func(t *testing.T, reg *prometheus.Registry) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "resilient_client_attempt_duration_seconds" {
				h := mf.GetMetric()[0].GetHistogram()
				if h.GetSampleCount() != 1 {
					t.Fatalf("%d attempts observed, want 1", h.GetSampleCount())
				}
				return h.GetSampleSum()
			}
		}
		t.Fatal("no attempt duration")
		return 0
	}
	t.Run("system clock", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m := timedMethod(t, time.Second, time.Second, WithRegisterer(reg))
		begin := time.Now()
		if _, err := Unary(context.Background(), m, "", &timedReq{}, nil, sleepy(30*time.Millisecond), nil); err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin).Seconds()
		if got := sum(t, reg); got < 0.030 || got > took {
			t.Errorf("attempt took %.4fs, want between the call's 0.030s and the %.4fs Unary took", got, took)
		}
	})
	t.Run("fake clock", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		clock := &stepClock{now: t0}
		m := timedMethod(t, time.Second, time.Second, WithRegisterer(reg), WithClock(clock))
		call := func(context.Context, *timedReq, ...grpc.CallOption) (*timedReq, error) {
			clock.now = clock.now.Add(7 * time.Second)
			return nil, status.Error(codes.NotFound, "an answer")
		}
		if _, err := Unary(context.Background(), m, "", &timedReq{}, nil, call, nil); status.Code(err) != codes.NotFound {
			t.Fatal(err)
		}
		if got := sum(t, reg); got != 7 {
			t.Errorf("attempt took %vs on the fake clock, want 7", got)
		}
	})
}

// stepClock is a fake clock moved by the test's own goroutine.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

// BenchmarkBreakerAttempt is the breaker's part of an attempt with a
// timeout, closed, as attemptOnce drives it: allow (no clock while
// closed), then doneEarly with the reading the attempt's context was made
// from. Each goroutine's reading advances 1µs per call without a clock
// read, so the window's buckets turn as in use. goroutines=64 shares one
// breaker between 64 goroutines (b.N split between them).
func BenchmarkBreakerAttempt(b *testing.B) {
	p := testBreakerPolicy()
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			br := newBreaker(p, t0, nil)
			now := func() int64 { b.Fatal("the clock was read"); return 0 }
			op := func(at int64) {
				tk, _, ok := br.allow(now, true)
				if !ok {
					b.Fatal("refused")
				}
				br.doneEarly(tk, at, now)
			}
			b.ReportAllocs()
			if g == 1 {
				var at int64
				for b.Loop() {
					at += 1000
					op(at)
				}
				return
			}
			b.SetParallelism(max(1, g/goruntime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				var at int64
				for pb.Next() {
					at += 1000
					op(at)
				}
			})
		})
	}
}
