package runtime

import (
	"math"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

func TestAddSatNeverWraps(t *testing.T) {
	for _, tc := range []struct {
		t    int64
		d    time.Duration
		want int64
	}{
		{0, math.MaxInt64, math.MaxInt64},
		{int64(time.Second), math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 - 5, 10, math.MaxInt64},
		{math.MaxInt64 - 10, 10, math.MaxInt64},
		{100, 10 * time.Second, 100 + int64(10*time.Second)},
		{math.MinInt64 + 5, -10, math.MinInt64},
		{-100, -10, -110},
	} {
		if got := addSat(tc.t, tc.d); got != tc.want {
			t.Errorf("addSat(%d, %d) = %d, want %d", tc.t, tc.d, got, tc.want)
		}
	}
}

func TestMsSatNeverWraps(t *testing.T) {
	most := int64(math.MaxInt64 / int64(time.Millisecond))
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0},
		{150, 150 * time.Millisecond},
		{most, time.Duration(most) * time.Millisecond},
		{most + 1, math.MaxInt64},
		{1 << 58, math.MaxInt64}, // wrapped to exactly 0 before
		{math.MaxInt64, math.MaxInt64},
		{-most - 1, math.MinInt64},
	} {
		if got := msSat(tc.ms); got != tc.want {
			t.Errorf("msSat(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

// TestBudgetEpisodeBeginsOnceAndEndsAfterAWindowWithoutRefusal: however
// many refusals an episode holds, it begins once, and ends only when a
// whole window passed since the last of them.
func TestBudgetEpisodeBeginsOnceAndEndsAfterAWindowWithoutRefusal(t *testing.T) {
	b := newBudget(policy.Budget{Ratio: 0.1, MinRetries: 1, Window: 10 * time.Second}, t0)
	sec := int64(time.Second)
	begun := 0
	for i := range int64(61) {
		if b.refused(i * sec / 30) {
			begun++
		}
	}
	if begun != 1 {
		t.Fatalf("%d episodes begun by 61 refusals in 2s, want 1", begun)
	}
	last := 60 * sec / 30
	if _, _, ok := b.recovered(last + 10*sec - 1); ok {
		t.Error("ended before a whole window passed without a refusal")
	}
	lasted, n, ok := b.recovered(last + 10*sec)
	if !ok || n != 61 || lasted != 2*time.Second {
		t.Errorf("recovered = %v, %d, %v; want 2s, 61 refusals, true", lasted, n, ok)
	}
	if _, _, ok := b.recovered(last + 20*sec); ok {
		t.Error("an episode ended twice")
	}
	if !b.refused(last + 21*sec) {
		t.Error("a refusal after the end did not begin a new episode")
	}
}

// TestBudgetFloorSaturates: a floor as large as an int allows every retry;
// the sum with the ratio's share once wrapped to a negative allowance,
// which refused them all.
func TestBudgetFloorSaturates(t *testing.T) {
	b := newBudget(policy.Budget{Ratio: 1, MinRetries: math.MaxInt, Window: 10 * time.Second}, t0)
	for range 5 {
		b.requestAt(t0)
	}
	for i := range 100 {
		if !b.tryRetryAt(t0) {
			t.Fatalf("retry %d refused by a budget whose floor is MaxInt", i+1)
		}
	}
}
