package adaptive_test

import (
	"fmt"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/adaptive"
)

// A limit under a static bulkhead of 8 permits: a burst of timeouts halves
// it once, and rounds of fast answers bring it back.
func Example() {
	base := time.Unix(0, 0)
	l, err := adaptive.New(adaptive.Policy{}.WithCeiling(8), base)
	if err != nil {
		panic(err)
	}
	now := base
	var held []adaptive.Token
	for {
		tok, ok := l.Acquire()
		if !ok {
			break // the ninth call is refused at once
		}
		held = append(held, tok)
	}
	fmt.Println("admitted", len(held), "of a limit of", l.Limit())

	now = now.Add(300 * time.Millisecond)
	for _, tok := range held {
		l.Release(tok, adaptive.Dropped, 300*time.Millisecond, now) // timed out together
	}
	fmt.Println("after a round of timeouts:", l.Limit())

	for l.Limit() < 8 {
		var round []adaptive.Token
		for range l.Limit() {
			tok, _ := l.Acquire()
			round = append(round, tok)
		}
		now = now.Add(40 * time.Millisecond)
		for _, tok := range round {
			l.Release(tok, adaptive.Success, 40*time.Millisecond, now)
		}
	}
	fmt.Println("back at", l.Limit(), "after", now.Sub(base.Add(300*time.Millisecond)))
	// Output:
	// admitted 8 of a limit of 8
	// after a round of timeouts: 4
	// back at 8 after 160ms
}
