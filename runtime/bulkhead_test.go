package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	b := NewBulkhead(BulkheadPolicy{Permits: 3})
	ctx := t.Context()
	for i := range 3 {
		if ok, waited := b.Acquire(ctx); !ok || waited != 0 {
			t.Fatalf("Acquire %d = (%v, %s), want (true, 0)", i+1, ok, waited)
		}
	}
	if b.InUse() != 3 {
		t.Fatalf("InUse = %d, want 3", b.InUse())
	}
	start := time.Now()
	if ok, waited := b.Acquire(ctx); ok || waited != 0 {
		t.Fatalf("4th Acquire = (%v, %s), want (false, 0)", ok, waited)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("refusal took %s, want at once", d)
	}
	b.Release()
	if ok, _ := b.Acquire(ctx); !ok {
		t.Fatal("Acquire after a Release refused")
	}
	for range 3 {
		b.Release()
	}
	if b.InUse() != 0 {
		t.Fatalf("InUse = %d, want 0", b.InUse())
	}
}

func TestBulkheadWaitersServedInOrder(t *testing.T) {
	b := NewBulkhead(BulkheadPolicy{Permits: 1, MaxWait: 10 * time.Second})
	ctx := t.Context()
	if ok, _ := b.Acquire(ctx); !ok {
		t.Fatal("first Acquire refused")
	}
	got := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if ok, _ := b.Acquire(ctx); !ok {
				t.Errorf("waiter %d refused", i)
				return
			}
			got <- i
		})
		waitFor(t, "the waiter is queued", func() bool { return b.waiting.Load() == int64(i+1) })
	}
	for want := range 3 {
		b.Release() // hands the permit to the longest waiter
		if i := <-got; i != want {
			t.Fatalf("permit went to waiter %d, want %d", i, want)
		}
		if b.InUse() != 1 {
			t.Fatalf("InUse = %d after hand-over, want 1", b.InUse())
		}
	}
	wg.Wait()
	b.Release()
	if b.InUse() != 0 || b.waiting.Load() != 0 || len(b.queue) != 0 {
		t.Fatalf("in use %d, waiting %d, queue %d; want all 0", b.InUse(), b.waiting.Load(), len(b.queue))
	}
}

func TestBulkheadWaitEndsAfterMaxWait(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	b := NewBulkhead(BulkheadPolicy{Permits: 1, MaxWait: maxWait})
	ctx := t.Context()
	b.Acquire(ctx)
	start := time.Now()
	ok, waited := b.Acquire(ctx)
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
	b.Release()
	if b.InUse() != 0 {
		t.Fatalf("InUse = %d, want 0", b.InUse())
	}
}

func TestBulkheadContextEndsWait(t *testing.T) {
	b := NewBulkhead(BulkheadPolicy{Permits: 1, MaxWait: time.Minute})
	b.Acquire(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan bool)
	go func() {
		ok, _ := b.Acquire(ctx)
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
	b.Release()
	if ok, _ := b.Acquire(t.Context()); !ok {
		t.Fatal("Acquire after the cancelled wait refused")
	}
	b.Release()

	// A context whose deadline comes before MaxWait ends the wait too.
	b.Acquire(t.Context())
	dctx, dcancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer dcancel()
	if ok, _ := b.Acquire(dctx); ok {
		t.Fatal("waiter past its deadline got a permit")
	}
	b.Release()
}

func TestBulkheadStress(t *testing.T) {
	for _, maxWait := range []time.Duration{0, time.Millisecond, time.Minute} {
		t.Run(maxWait.String(), func(t *testing.T) {
			const permits = 4
			b := NewBulkhead(BulkheadPolicy{Permits: permits, MaxWait: maxWait})
			var inUse, maxInUse, granted, refused atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Go(func() {
					for i := range 200 {
						ok, _ := b.Acquire(t.Context())
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
						b.Release()
					}
				})
			}
			wg.Wait()
			if m := maxInUse.Load(); m > permits {
				t.Fatalf("%d calls in flight at once, more than %d permits", m, permits)
			}
			if b.InUse() != 0 || b.waiting.Load() != 0 || len(b.queue) != 0 {
				t.Fatalf("at the end: in use %d, waiting %d, queue %d; want 0", b.InUse(), b.waiting.Load(), len(b.queue))
			}
			if maxWait == time.Minute && refused.Load() != 0 {
				t.Fatalf("%d refusals with a minute to wait", refused.Load())
			}
			t.Logf("granted %d, refused %d, at most %d in flight", granted.Load(), refused.Load(), maxInUse.Load())
		})
	}
}
