package runtime

import (
	"fmt"
	"math/big"
	"strconv"
	"testing"
	"time"
)

// TestAttack25lOpensExactlyAtADecimalFailureRatio: the README says the
// breaker opens when failures / calls ≥ failure_ratio, and a policy writes
// its ratio as a decimal (0.55, 0.07). A window holding exactly that share
// must open the breaker: 55 failures of 100 calls under 0.55, 7 of 100
// under 0.07, 14 of 25 under 0.56. One failure fewer must not.
//
// Before, the breaker compared failures ≥ ratio × calls in floating point,
// and the product rounds up for these decimals (0.55 × 100 is
// 55.00000000000001): the breaker stayed closed at exactly the ratio, for
// 11 of the 99 two-digit ratios.
func TestAttack25lOpensExactlyAtADecimalFailureRatio(t *testing.T) {
	for k := 1; k < 100; k++ {
		s := fmt.Sprintf("0.%02d", k)
		ratio, _ := strconv.ParseFloat(s, 64)
		exact, _ := new(big.Rat).SetString(s)
		// The smallest window whose calls × ratio is a whole number of
		// failures, and a few multiples of it.
		den := exact.Denom().Int64()
		for _, calls := range []int64{den, 2 * den, 3 * den, 7 * den, 9 * den} {
			failures := calls * exact.Num().Int64() / den
			for _, f := range []int64{failures - 1, failures} {
				if f < 0 {
					continue
				}
				p := testBreakerPolicy()
				p.FailureRatio = ratio
				p.MinimumCalls = int(calls)
				b, _ := newTestBreaker(p)
				now := t0.Add(time.Second)
				for range calls - f {
					call(t, b, now, outcomeSuccess)
				}
				for range f {
					call(t, b, now, outcomeFailure)
				}
				want := f == failures
				if got := b.stateAtTime(now) == StateOpen; got != want {
					t.Errorf("failure_ratio %s, %d failures of %d calls: open = %v, want %v", s, f, calls, got, want)
				}
			}
		}
	}
}
