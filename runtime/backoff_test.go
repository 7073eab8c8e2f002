package runtime

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

func TestBackoffBoundGrowsAndCaps(t *testing.T) {
	p := &policy.Retry{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2}
	for n, want := range map[int]time.Duration{
		-5: 100 * time.Millisecond, // before the first retry: the first bound
		0:  100 * time.Millisecond,
		1:  100 * time.Millisecond,
		2:  200 * time.Millisecond,
		3:  400 * time.Millisecond,
		4:  800 * time.Millisecond,
		5:  time.Second, // 1.6 s capped
		6:  time.Second,
		50: time.Second,
	} {
		if got := backoffBound(p, n); got != want {
			t.Errorf("bound of retry %d = %s, want %s", n, got, want)
		}
	}
	p = &policy.Retry{InitialBackoff: 40 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 1.5}
	for n, want := range []time.Duration{1: 40e6, 2: 60e6, 3: 90e6, 4: 135e6, 5: 202.5e6} {
		if n == 0 {
			continue
		}
		if got := backoffBound(p, n); got != want {
			t.Errorf("×1.5: bound of retry %d = %s, want %s", n, got, want)
		}
	}
	// A multiplier below 1 is taken as 1: the bound never shrinks.
	p = &policy.Retry{InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 0.5}
	if got := backoffBound(p, 10); got != 50*time.Millisecond {
		t.Errorf("×0.5: bound = %s, want 50ms", got)
	}
}

func TestBackoffDrawsWithinBound(t *testing.T) {
	p := &policy.Retry{InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Multiplier: 3}
	for n := 1; n <= 6; n++ {
		bound := backoffBound(p, n)
		var sum float64
		const draws = 20000
		for range draws {
			d := backoffFor(p, n)
			if d < 0 || d >= bound {
				t.Fatalf("retry %d drew %s, outside [0, %s)", n, d, bound)
			}
			sum += float64(d)
		}
		// Full jitter: uniform over [0, bound), mean bound/2. The standard
		// error of the mean is bound/sqrt(12·draws) ≈ 0.2 % of the bound;
		// 3 % is far outside chance.
		if mean := sum / draws; math.Abs(mean-float64(bound)/2) > 0.03*float64(bound) {
			t.Errorf("retry %d: mean draw %s, want about %s", n, time.Duration(mean), bound/2)
		}
	}
}

func TestBackoffZeroBound(t *testing.T) {
	p := &policy.Retry{}
	for range 10 {
		if d := backoffFor(p, 3); d != 0 {
			t.Fatalf("zero policy drew %s, want 0", d)
		}
	}
	if d := jitter(-time.Second); d != 0 {
		t.Fatalf("negative bound drew %s, want 0", d)
	}
}

func TestBackoffHugeRetryNumbersDoNotOverflow(t *testing.T) {
	for _, p := range []*policy.Retry{
		{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second, Multiplier: 2},
		{InitialBackoff: time.Nanosecond, MaxBackoff: math.MaxInt64, Multiplier: 2},
		{InitialBackoff: time.Second, MaxBackoff: math.MaxInt64, Multiplier: 10},
		{InitialBackoff: time.Hour, MaxBackoff: math.MaxInt64, Multiplier: math.MaxFloat64},
	} {
		for _, n := range []int{30, 62, 63, 64, 65, 100, 1000, 1 << 20, math.MaxInt32, math.MaxInt} {
			bound := backoffBound(p, n)
			if bound <= 0 || bound > p.MaxBackoff {
				t.Errorf("%+v: bound of retry %d = %s, want in (0, %s]", *p, n, bound, p.MaxBackoff)
			}
			if d := backoffFor(p, n); d < 0 || d >= max(bound, 1) {
				t.Errorf("%+v: retry %d drew %s", *p, n, d)
			}
		}
		// The bound never decreases as n grows.
		prev := time.Duration(0)
		for n := 1; n < 200; n++ {
			b := backoffBound(p, n)
			if b < prev {
				t.Fatalf("%+v: bound of retry %d (%s) below that of %d (%s)", *p, n, b, n-1, prev)
			}
			prev = b
		}
	}
}

// TestBackoffWalkthrough: each wait is drawn uniformly below a bound that grows from
// InitialBackoff by Multiplier and stops at MaxBackoff.
func TestBackoffWalkthrough(t *testing.T) {
	var out strings.Builder
	p := &policy.Retry{
		MaxAttempts:    6,
		InitialBackoff: 100 * time.Millisecond,
		MaxBackoff:     time.Second,
		Multiplier:     2,
	}
	bound := p.InitialBackoff
	for n := 1; n <= 5; n++ {
		d := backoffFor(p, n)
		fmt.Fprintf(&out, "retry %d waits in [0, %s): %v\n", n, bound, d >= 0 && d < bound)
		bound = min(bound*2, p.MaxBackoff)
	}
	const want = `retry 1 waits in [0, 100ms): true
retry 2 waits in [0, 200ms): true
retry 3 waits in [0, 400ms): true
retry 4 waits in [0, 800ms): true
retry 5 waits in [0, 1s): true
`
	if got := out.String(); got != want {
		t.Errorf("walkthrough printed\n%s\nwant\n%s", got, want)
	}
}
