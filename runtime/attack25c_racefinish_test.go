package runtime

// Attack 25c on the cache's shared call below the handles: a panic in the
// shared call "reaches every caller still waiting for it; when none is
// left, it goes on on the shared call's own goroutine" (README, Cache). The
// two are told apart by finish, which reports whether a caller still
// waited; a waiter that leaves (its context over) looks for the flight's
// end right after. The test races the two as they race in the runtime.

import (
	"context"
	goruntime "runtime"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack25cAWaiterFinishCountedSeesTheFlightDone: a flight that
// panicked is finished on one goroutine while its one waiter leaves on
// another and then looks whether the flight is done (as cached does when
// its context ends). Whenever finish counted the waiter (so the shared
// call does not panic on its own goroutine), the waiter must find the
// flight done, with the panic to raise; otherwise nobody raises it.
// Before, finish released the cache's lock before closing the flight: a
// waiter leaving in between found it not done, and the panic was
// swallowed (about 100 times in 50000 rounds under -race, once without).
func TestAttack25cAWaiterFinishCountedSeesTheFlightDone(t *testing.T) {
	c := newCache(policy.Cache{FreshTTL: 1, StaleTTL: 1, MaxEntries: 1})
	const rounds = 50000
	swallowed := 0
	for range rounds {
		f, _ := c.join(context.Background(), "k")
		waitedCh := make(chan bool, 1)
		go func() {
			f.panicked = "the shared call's panic"
			waitedCh <- c.finish("k", f, nil, status.Error(codes.Internal, "the shared call panicked"), 0)
		}()
		goruntime.Gosched()
		c.leave("k", f)
		done := false
		select {
		case <-f.done:
			done = f.panicked != nil
		default:
		}
		if waited := <-waitedCh; waited && !done {
			swallowed++
		}
		f.cancel()
	}
	if swallowed != 0 {
		t.Errorf("in %d of %d rounds finish counted the leaving waiter, which then found the flight not done: the panic reached nobody", swallowed, rounds)
	}
}
