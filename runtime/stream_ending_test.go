package runtime_test

// Where a stream's ending runs when its context ends (README, "Streams"
// and "Logs and events"): on the goroutine of the stream's call in
// progress, so that a panicking observer of the transition it causes
// reaches that caller; on a goroutine of the runtime only when no call is
// in progress. The permit goes back at once either way.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// streamEndingRounds is how many streams the child opens, each on a client
// of its own whose breaker the stream's timeout opens.
const streamEndingRounds = 5

// TestStreamTimeoutPanicReachesTheCallerOfHeader: as
// TestAttack21aObserverPanicAtAStreamsTimeoutReachesItsReader with the
// caller waiting in Header instead of Recv (an interceptor's Header that
// waits for the end of the stream's context): the stream's own timeout
// opens the breaker, the observer panics there, and the panic comes out
// of Header, with the permit back when it does.
// Before, the ending ran on the context.AfterFunc goroutine and the panic
// ended the program. The program is a child process of this test.
func TestStreamTimeoutPanicReachesTheCallerOfHeader(t *testing.T) {
	if os.Getenv("STREAM_ENDING_CHILD") == "header" {
		streamEndingChildHeader(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamTimeoutPanicReachesTheCallerOfHeader$", "-test.v")
	cmd.Env = append(os.Environ(), "STREAM_ENDING_CHILD=header")
	out, err := cmd.CombinedOutput()
	want := fmt.Sprintf("STREAM ENDING: %d of %d callers got the observer's panic (", streamEndingRounds, streamEndingRounds)
	if err != nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "(0 from Header)") {
		t.Errorf("the child died or a caller missed the observer's panic (exit %v), want %q and some from Header:\n%s", err, want, out)
	}
}

// headerAtTheEnd is an interceptor's client stream whose Header waits for
// the stream's context to end before it asks gRPC (a server may send its
// header at once; this one is still in the call when the timeout comes).
type headerAtTheEnd struct {
	grpc.ClientStream
	ctx context.Context
}

func (s *headerAtTheEnd) Header() (metadata.MD, error) {
	<-s.ctx.Done()
	return s.ClientStream.Header()
}

func streamEndingChildHeader(t *testing.T) {
	srv, err := faultserver.Start(server.Hang, runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cc := dialFault(t, srv.Addr(), grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &headerAtTheEnd{ClientStream: cs, ctx: ctx}, nil
	}))
	caught, fromHeader := 0, 0
	for i := range streamEndingRounds {
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
			Runtime: []runtime.Option{runtime.WithObserver(func(e runtime.Event) {
				if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen {
					panic("stream ending: observer panics at open")
				}
			})},
		}, func(p *policy.Service) {
			p.Breaker.MinimumCalls = 1
			atkMethod(p, atkWatchStock).Timeout = 300 * time.Millisecond
		})
		// On a loaded machine the timeout may come while WatchStock is still
		// sending the request: the panic then comes out of WatchStock, its
		// caller all the same.
		inHeader := false
		p := r18Panicked(func() {
			st, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"})
			if err != nil {
				t.Errorf("stream %d: %v", i, err)
				return
			}
			inHeader = true
			_, _ = st.Header()
		})
		if p != nil && strings.Contains(fmt.Sprint(p), "stream ending: observer panics at open") {
			caught++
			if inHeader {
				fromHeader++
			}
		}
		atkWantNoPermits(t, c.Runtime(), atkWatchStock, "once the panic reached the caller")
		atkWantBreaker(t, c.Runtime(), atkGetStock, runtime.StateOpen, "the timed-out stream left the breaker %v, want open")
	}
	fmt.Printf("STREAM ENDING: %d of %d callers got the observer's panic (%d from Header)\n", caught, streamEndingRounds, fromHeader)
}

// TestStreamNobodyReadsEndsAtItsTimeout: with an observer (so that the
// ending is one that waits for a call in progress), a stream nobody reads
// is still ended at its timeout by the runtime: the permit goes back, the
// failure opens the breaker (the observer sees it, once), and it counts one
// DEADLINE_EXCEEDED attempt.
func TestStreamNobodyReadsEndsAtItsTimeout(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Hang)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	opened := 0
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithRegisterer(reg), runtime.WithObserver(func(e runtime.Event) {
			if e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen {
				mu.Lock()
				opened++
				mu.Unlock()
			}
		})},
	}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 1
		// Long enough for the stream to reach the server under -race on
		// a loaded machine (at 50 ms it once did not).
		atkMethod(p, atkWatchStock).Timeout = 250 * time.Millisecond
	})
	rt := c.Runtime()
	if _, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}); err != nil {
		t.Fatal(err)
	}
	atkWaitFor(t, "the unread stream's ending", func() bool {
		s, _ := rt.BreakerState(atkGetStock)
		return s == runtime.StateOpen && atkInUse(t, rt, atkWatchStock) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if opened != 1 {
		t.Errorf("the observer saw the breaker open %d times, want 1", opened)
	}
	wantMetric(t, reg, 1, "resilient_client_attempts_total", "dependency", attack20bDep, "method", "WatchStock", "code", "DEADLINE_EXCEEDED")
	if n := srv.Calls(atkWatchStock); n != 1 {
		t.Errorf("the server saw %d streams, want 1", n)
	}
}
