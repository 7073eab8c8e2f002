package runtime_test

// Attacks on the observer's promise (README, "Logs and events"): it runs
// on the goroutine of the call or stream that caused the event, so that a
// panic in it goes on to that caller, "from the call, the stream's opening
// or its Recv".

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack21aStreamRounds is how many streams the child opens, each on a
// client of its own: each one's timeout opens its client's breaker.
const attack21aStreamRounds = 5

// TestAttack21aObserverPanicAtAStreamsTimeoutReachesItsReader: a caller
// reads a WatchStock stream (Recv blocks) on a server that never sends;
// the stream's own timeout (100 ms) ends it, DEADLINE_EXCEEDED, a
// failure, which opens the breaker (minimum_calls 1), and the observer
// panics at that transition. The README says the panic goes on to the
// caller, from its Recv. The stream's ending ran either in Recv or in
// the context.AfterFunc the runtime registers on the stream's context, on
// a goroutine of its own, whichever came first; the AfterFunc usually
// did (the timer fires before gRPC wakes the reader), and a panic on that
// goroutine ended the program: the reader never saw it. Now the AfterFunc
// leaves the ending to the Recv in progress. The program is a child
// process of this test.
func TestAttack21aObserverPanicAtAStreamsTimeoutReachesItsReader(t *testing.T) {
	if os.Getenv("ATTACK21A_CHILD") == "stream-timeout" {
		attack21aChildStreamTimeout(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack21aObserverPanicAtAStreamsTimeoutReachesItsReader$", "-test.v")
	cmd.Env = append(os.Environ(), "ATTACK21A_CHILD=stream-timeout")
	out, err := cmd.CombinedOutput()
	want := fmt.Sprintf("ATTACK21A: %d of %d readers got the observer's panic", attack21aStreamRounds, attack21aStreamRounds)
	if err != nil || !strings.Contains(string(out), want) {
		t.Errorf("the child died or a reader missed the observer's panic (exit %v), want %q:\n%s", err, want, out)
	}
}

func attack21aChildStreamTimeout(t *testing.T) {
	srv, err := faultserver.Start(server.Hang, runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cc := dialFault(t, srv.Addr())
	caught := 0
	for i := range attack21aStreamRounds {
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
			Runtime: []runtime.Option{runtime.WithObserver(func(e runtime.Event) {
				if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen {
					panic("attack21a: observer panics at open")
				}
			})},
		}, func(p *policy.Service) {
			p.Breaker.MinimumCalls = 1
			atkMethod(p, atkWatchStock).Timeout = 100 * time.Millisecond
		})
		st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		p := r18Panicked(func() { _, _ = st.Recv() })
		if p != nil && strings.Contains(fmt.Sprint(p), "attack21a: observer panics at open") {
			caught++
		}
		atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "the timed-out stream left the breaker %v, want open")
	}
	fmt.Printf("ATTACK21A: %d of %d readers got the observer's panic\n", caught, attack21aStreamRounds)
}
