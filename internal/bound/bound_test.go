package bound

import (
	"math"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

const ms = time.Millisecond

// TestCall: each rule of Call's doc comment, and the edges where a sum
// could wrap.
func TestCall(t *testing.T) {
	retry := func(attempts int) *policy.Retry {
		return &policy.Retry{MaxAttempts: attempts, InitialBackoff: 50 * ms, MaxBackoff: 200 * ms, Multiplier: 2}
	}
	hedge := func(copies int) *policy.Hedging { return &policy.Hedging{Delay: 100 * ms, MaxCopies: copies} }
	for _, tc := range []struct {
		name string
		m    policy.Method
		want time.Duration
	}{
		{"nothing", policy.Method{}, 0},
		{"one attempt", policy.Method{Timeout: 300 * ms}, 300 * ms},
		{"one attempt, overall longer", policy.Method{Timeout: 300 * ms, OverallTimeout: time.Second}, 300 * ms},
		{"one attempt, overall shorter", policy.Method{Timeout: 300 * ms, OverallTimeout: 200 * ms}, 200 * ms},
		{"overall only", policy.Method{OverallTimeout: time.Second}, time.Second},
		{"retried", policy.Method{Timeout: 300 * ms, Retry: retry(3)}, 900*ms + 50*ms + 100*ms},
		{"retried to the cap", policy.Method{Timeout: 100 * ms, Retry: retry(5)}, 500*ms + 50*ms + 100*ms + 200*ms + 200*ms},
		{"retried, overall", policy.Method{Timeout: 300 * ms, OverallTimeout: 500 * ms, Retry: retry(3)}, 500 * ms},
		{"retried, no timeout", policy.Method{Retry: retry(3)}, 0},
		{"retry of one attempt", policy.Method{Timeout: 300 * ms, Retry: retry(1)}, 300 * ms},
		// One attempt is one attempt: a retry of max_attempts 1 (an
		// override's way to turn retries off) is bounded as no retry.
		{"retry of one attempt, overall longer", policy.Method{Timeout: 300 * ms, OverallTimeout: time.Second, Retry: retry(1)}, 300 * ms},
		{"retry of one attempt, overall shorter", policy.Method{Timeout: 300 * ms, OverallTimeout: 200 * ms, Retry: retry(1)}, 200 * ms},
		{"retry of one attempt, overall only", policy.Method{OverallTimeout: time.Second, Retry: retry(1)}, time.Second},
		{"retry of one attempt, nothing", policy.Method{Retry: retry(1)}, 0},
		{"retry of no attempts", policy.Method{Timeout: 300 * ms, OverallTimeout: time.Second, Retry: retry(0)}, 300 * ms},
		{"retried twice, overall longer", policy.Method{Timeout: 300 * ms, OverallTimeout: time.Second, Retry: retry(2)}, time.Second},
		{"multiplier 1", policy.Method{Timeout: 10 * ms, Retry: &policy.Retry{MaxAttempts: 4, InitialBackoff: 5 * ms, MaxBackoff: time.Second, Multiplier: 1}}, 40*ms + 15*ms},
		// Every copy the generated client sends, not gRPC's five.
		{"hedged", policy.Method{Timeout: 300 * ms, Hedging: hedge(3)}, 500 * ms},
		{"hedged, eight copies", policy.Method{Timeout: 300 * ms, Hedging: hedge(8)}, 1000 * ms},
		{"hedged, overall", policy.Method{Timeout: 300 * ms, OverallTimeout: 350 * ms, Hedging: hedge(3)}, 350 * ms},
		{"hedged, no timeout", policy.Method{Hedging: hedge(3)}, 0},
		{"hedged, retry of one attempt", policy.Method{Timeout: 300 * ms, Retry: retry(1), Hedging: hedge(3)}, 500 * ms},
		{"hedged, longest delay", policy.Method{Timeout: 1, Hedging: &policy.Hedging{Delay: math.MaxInt64, MaxCopies: 3}}, math.MaxInt64},
		{"retried, saturates", policy.Method{Timeout: 10 * time.Second, Retry: &policy.Retry{MaxAttempts: 1e9, InitialBackoff: 50 * ms, MaxBackoff: time.Second, Multiplier: 2}}, math.MaxInt64},
		{"retried, longest backoff", policy.Method{Timeout: ms, Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: math.MaxInt64, MaxBackoff: math.MaxInt64, Multiplier: 2}}, math.MaxInt64},
		// A stream is never retried nor hedged: its own limit only.
		{"stream", policy.Method{Kind: policy.KindServerStreaming, Timeout: 300 * ms}, 300 * ms},
		{"stream, overall", policy.Method{Kind: policy.KindBidiStreaming, Timeout: 300 * ms, OverallTimeout: time.Second}, time.Second},
		{"stream, retry ignored", policy.Method{Kind: policy.KindClientStreaming, Timeout: 300 * ms, Retry: retry(3)}, 300 * ms},
		{"stream, nothing", policy.Method{Kind: policy.KindServerStreaming}, 0},
	} {
		if got := Call(&tc.m); got != tc.want {
			t.Errorf("%s: Call = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCallOneAttemptIsNoRetry: for every combination of timeouts, a
// unary call whose retry makes at most one attempt is bounded exactly as
// the same call with no retry, and OneAttempt says so; a retry of two
// attempts or a hedge is not one attempt.
func TestCallOneAttemptIsNoRetry(t *testing.T) {
	durations := []time.Duration{0, 1, 200 * ms, 300 * ms, math.MaxInt64}
	for _, timeout := range durations {
		for _, overall := range durations {
			plain := policy.Method{Timeout: timeout, OverallTimeout: overall}
			want := Call(&plain)
			if !OneAttempt(&plain) {
				t.Errorf("OneAttempt(%+v) = false, want true", plain)
			}
			for _, attempts := range []int{-1, 0, 1} {
				m := plain
				m.Retry = &policy.Retry{MaxAttempts: attempts, InitialBackoff: 50 * ms, MaxBackoff: time.Second, Multiplier: 2}
				if got := Call(&m); got != want || !OneAttempt(&m) {
					t.Errorf("timeout %v, overall %v, max_attempts %d: Call = %v (OneAttempt %v), want %v as with no retry",
						timeout, overall, attempts, got, OneAttempt(&m), want)
				}
			}
		}
	}
	for _, m := range []policy.Method{
		{Retry: &policy.Retry{MaxAttempts: 2}},
		{Hedging: &policy.Hedging{Delay: ms, MaxCopies: 2}},
		{Retry: &policy.Retry{MaxAttempts: 1}, Hedging: &policy.Hedging{Delay: ms, MaxCopies: 2}},
	} {
		if OneAttempt(&m) {
			t.Errorf("OneAttempt(retry %+v, hedging %+v) = true, want false", m.Retry, m.Hedging)
		}
	}
}

// TestCallHugeAttemptsIsQuick: max_attempts may be any uint32; the bound is
// computed in a bounded number of steps, not one per attempt.
func TestCallHugeAttemptsIsQuick(t *testing.T) {
	m := policy.Method{Timeout: ms, Retry: &policy.Retry{MaxAttempts: 1<<32 - 1, InitialBackoff: ms, MaxBackoff: time.Second, Multiplier: 1}}
	start := time.Now()
	got := Call(&m)
	if took := time.Since(start); took > 100*ms {
		t.Errorf("Call took %v for %d attempts", took, m.Retry.MaxAttempts)
	}
	if want := time.Duration(1<<32-1)*ms + time.Duration(1<<32-2)*ms; got != want {
		t.Errorf("Call = %v, want %v", got, want)
	}
	// Multiplier 1.0001 never caps within maxSteps: later waits count at
	// MaxBackoff, never less than the runtime may draw.
	m.Retry.Multiplier = 1.0001
	if got, least := Call(&m), time.Duration(1<<32-1)*ms; got < least {
		t.Errorf("Call = %v, below the attempts alone (%v)", got, least)
	}
}
