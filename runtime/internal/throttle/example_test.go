package throttle_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/throttle"
)

// A throttler in front of a dependency that refuses everything for ten
// seconds, at 100 requests a second.
func Example() {
	base := time.Unix(0, 0)
	th, err := throttle.New(throttle.Policy{}, base, rand.New(rand.NewPCG(1, 2)).Float64)
	if err != nil {
		panic(err)
	}
	reached := 0
	for i := range 1000 {
		now := base.Add(time.Duration(i) * 10 * time.Millisecond)
		if th.Allow(now) {
			reached++
			th.Record(now, false) // UNAVAILABLE
		}
	}
	fmt.Printf("%d of 1000 requests reached it; refusal probability %.2f\n", reached, th.RefusalProbability(base.Add(10*time.Second)))
	// Output:
	// 99 of 1000 requests reached it; refusal probability 0.90
}
