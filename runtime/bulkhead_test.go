package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// waitFor polls cond every 100 µs for up to 5 s: it waits for a goroutine
// to reach a state (queued as a waiter), not for time to pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestBulkheadRefusesAtOnceWhenFull(t *testing.T) {
	b := newBulkhead(policy.Bulkhead{Permits: 3})
	ctx := t.Context()
	for i := range 3 {
		if ok, waited := b.acquire(ctx); !ok || waited != 0 {
			t.Fatalf("Acquire %d = (%v, %s), want (true, 0)", i+1, ok, waited)
		}
	}
	if b.taken() != 3 {
		t.Fatalf("InUse = %d, want 3", b.taken())
	}
	start := time.Now()
	if ok, waited := b.acquire(ctx); ok || waited != 0 {
		t.Fatalf("4th Acquire = (%v, %s), want (false, 0)", ok, waited)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("refusal took %s, want at once", d)
	}
	b.release()
	if ok, _ := b.acquire(ctx); !ok {
		t.Fatal("Acquire after a Release refused")
	}
	for range 3 {
		b.release()
	}
	if b.taken() != 0 {
		t.Fatalf("InUse = %d, want 0", b.taken())
	}
}

func TestBulkheadWaitersServedInOrder(t *testing.T) {
	b := newBulkhead(policy.Bulkhead{Permits: 1, MaxWait: 10 * time.Second})
	ctx := t.Context()
	if ok, _ := b.acquire(ctx); !ok {
		t.Fatal("first Acquire refused")
	}
	got := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if ok, _ := b.acquire(ctx); !ok {
				t.Errorf("waiter %d refused", i)
				return
			}
			got <- i
		})
		waitFor(t, "the waiter is queued", func() bool { return b.waiting.Load() == int64(i+1) })
	}
	for want := range 3 {
		b.release() // hands the permit to the longest waiter
		if i := <-got; i != want {
			t.Fatalf("permit went to waiter %d, want %d", i, want)
		}
		if b.taken() != 1 {
			t.Fatalf("InUse = %d after hand-over, want 1", b.taken())
		}
	}
	wg.Wait()
	b.release()
	if b.taken() != 0 || b.waiting.Load() != 0 || len(b.queue) != 0 {
		t.Fatalf("in use %d, waiting %d, queue %d; want all 0", b.taken(), b.waiting.Load(), len(b.queue))
	}
}

func TestBulkheadWaitEndsAfterMaxWait(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	b := newBulkhead(policy.Bulkhead{Permits: 1, MaxWait: maxWait})
	ctx := t.Context()
	b.acquire(ctx)
	start := time.Now()
	ok, waited := b.acquire(ctx)
	elapsed := time.Since(start)
	if ok {
		t.Fatal("Acquire with every permit held got one")
	}
	if waited < maxWait || elapsed < maxWait {
		t.Fatalf("waited %s (measured %s), want at least %s", waited, elapsed, maxWait)
	}
	if b.waiting.Load() != 0 || len(b.queue) != 0 {
		t.Fatal("the refused waiter is still queued")
	}
	b.release()
	if b.taken() != 0 {
		t.Fatalf("InUse = %d, want 0", b.taken())
	}
}

func TestBulkheadContextEndsWait(t *testing.T) {
	b := newBulkhead(policy.Bulkhead{Permits: 1, MaxWait: time.Minute})
	b.acquire(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan bool)
	go func() {
		ok, _ := b.acquire(ctx)
		done <- ok
	}()
	waitFor(t, "the waiter is queued", func() bool { return b.waiting.Load() == 1 })
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("a cancelled waiter got a permit")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the context did not end the wait")
	}
	if b.waiting.Load() != 0 || len(b.queue) != 0 {
		t.Fatal("the cancelled waiter is still queued")
	}
	// Its place is not lost: the permit goes to the next caller.
	b.release()
	if ok, _ := b.acquire(t.Context()); !ok {
		t.Fatal("Acquire after the cancelled wait refused")
	}
	b.release()

	// A context whose deadline comes before MaxWait ends the wait too.
	b.acquire(t.Context())
	dctx, dcancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer dcancel()
	if ok, _ := b.acquire(dctx); ok {
		t.Fatal("waiter past its deadline got a permit")
	}
	b.release()
}

func TestBulkheadStress(t *testing.T) {
	for _, maxWait := range []time.Duration{0, time.Millisecond, time.Minute} {
		t.Run(maxWait.String(), func(t *testing.T) {
			const permits = 4
			b := newBulkhead(policy.Bulkhead{Permits: permits, MaxWait: maxWait})
			var inUse, maxInUse, granted, refused atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Go(func() {
					for i := range 200 {
						ok, _ := b.acquire(t.Context())
						if !ok {
							refused.Add(1)
							continue
						}
						granted.Add(1)
						n := inUse.Add(1)
						for {
							m := maxInUse.Load()
							if n <= m || maxInUse.CompareAndSwap(m, n) {
								break
							}
						}
						if (g+i)%16 == 0 {
							time.Sleep(10 * time.Microsecond)
						}
						inUse.Add(-1)
						b.release()
					}
				})
			}
			wg.Wait()
			if m := maxInUse.Load(); m > permits {
				t.Fatalf("%d calls in flight at once, more than %d permits", m, permits)
			}
			if b.taken() != 0 || b.waiting.Load() != 0 || len(b.queue) != 0 {
				t.Fatalf("at the end: in use %d, waiting %d, queue %d; want 0", b.taken(), b.waiting.Load(), len(b.queue))
			}
			if maxWait == time.Minute && refused.Load() != 0 {
				t.Fatalf("%d refusals with a minute to wait", refused.Load())
			}
			t.Logf("granted %d, refused %d, at most %d in flight", granted.Load(), refused.Load(), maxInUse.Load())
		})
	}
}

// TestBulkheadWalkthrough fills a bulkhead of two permits, is refused a
// third, and gives every permit back.
func TestBulkheadWalkthrough(t *testing.T) {
	var out strings.Builder
	b := newBulkhead(policy.Bulkhead{Permits: 2})
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		ok, _ := b.acquire(ctx)
		fmt.Fprintf(&out, "call %d admitted: %v (in use %d)\n", i, ok, b.taken())
	}
	b.release()
	ok, _ := b.acquire(ctx)
	fmt.Fprintln(&out, "after a release:", ok)
	b.release()
	b.release()
	fmt.Fprintln(&out, "in use at the end:", b.taken())
	const want = `call 1 admitted: true (in use 1)
call 2 admitted: true (in use 2)
call 3 admitted: false (in use 2)
after a release: true
in use at the end: 0
`
	if got := out.String(); got != want {
		t.Errorf("walkthrough printed\n%s\nwant\n%s", got, want)
	}
}
