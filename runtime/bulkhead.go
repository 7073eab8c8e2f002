package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// bulkhead bounds the calls in flight towards a dependency to Permits, so
// that a slow dependency holds at most that many of the caller's goroutines.
// A call that finds every permit taken waits at most MaxWait (and never past
// its context) for one, then is refused.
//
// Taking and returning a permit is one atomic operation while permits are
// free and nobody waits; the mutex is used only to queue and wake waiters.
type bulkhead struct {
	permits int64
	maxWait time.Duration

	inUse   atomic.Int64
	waiting atomic.Int64
	mu      sync.Mutex
	queue   []chan struct{} // FIFO; a closed channel has been handed a permit

	streams streamSet // the open streams holding a permit
}

// newBulkhead returns a bulkhead with every permit free.
func newBulkhead(p policy.Bulkhead) *bulkhead {
	return &bulkhead{permits: int64(p.Permits), maxWait: p.MaxWait}
}

// taken returns the number of permits taken.
func (b *bulkhead) taken() int { return int(b.inUse.Load()) }

func (b *bulkhead) tryAcquire() bool {
	for {
		n := b.inUse.Load()
		if n >= b.permits {
			return false
		}
		if b.inUse.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// takeFree takes a free permit in one compare-and-swap, small enough to
// be inlined: false when none is free or another call took or returned
// one meanwhile (tryAcquire then decides).
func (b *bulkhead) takeFree() bool {
	n := b.inUse.Load()
	return n < b.permits && b.inUse.CompareAndSwap(n, n+1)
}

// acquire takes a permit, waiting up to MaxWait for one. It returns false
// when none could be had in that time or before ctx ended, and how long it
// waited. A successful acquire must be paired with one release.
func (b *bulkhead) acquire(ctx context.Context) (bool, time.Duration) {
	if b.tryAcquire() {
		return true, 0
	}
	if b.maxWait <= 0 {
		return false, 0
	}
	start := time.Now()
	ch := make(chan struct{})
	b.mu.Lock()
	b.queue = append(b.queue, ch)
	b.waiting.Add(1)
	b.mu.Unlock()
	// A permit returned between the failed try and the queueing saw nobody
	// waiting and was not handed over: try once more now that we are queued.
	if b.tryAcquire() {
		if !b.leave(ch) {
			b.release() // handed a second permit meanwhile: give it back
		}
		return true, time.Since(start)
	}
	// Never past the call's deadline, whether or not its context's own
	// timer has run by then (a loaded machine runs it late).
	wait := b.maxWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, max(time.Until(dl), 0))
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ch:
		return true, time.Since(start)
	case <-timer.C:
	case <-ctx.Done():
	}
	if !b.leave(ch) {
		// Handed a permit just as the wait ended: the call may proceed.
		return true, time.Since(start)
	}
	return false, time.Since(start)
}

// leave takes ch out of the queue. It returns false if ch had already been
// handed a permit.
func (b *bulkhead) leave(ch chan struct{}) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, c := range b.queue {
		if c == ch {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.waiting.Add(-1)
			return true
		}
	}
	return false
}

// release returns a permit, handing it to the longest waiter if any. It
// is small enough to be inlined: only a release that finds a waiter calls
// handOver.
func (b *bulkhead) release() {
	b.inUse.Add(-1)
	if b.waiting.Load() != 0 {
		b.handOver()
	}
}

// handOver hands the free permits to the longest waiters.
func (b *bulkhead) handOver() {
	b.mu.Lock()
	for len(b.queue) > 0 && b.tryAcquire() {
		ch := b.queue[0]
		b.queue = b.queue[1:]
		b.waiting.Add(-1)
		close(ch)
	}
	b.mu.Unlock()
}

// acquirePermit takes a permit of the method's bulkhead (which must not be
// nil), counting it in the metrics; the error is the caller's own context
// error, or the refusal. queued says whether the call went to the
// bulkhead's queue, where it may have waited: a clock reading taken
// before then is no longer its start.
func (m *methodState) acquirePermit(ctx context.Context) (queued bool, err error) {
	bh, mx := m.bulkhead, m.metrics
	if bh.tryAcquire() { // acquire's first step, without its call
		if mx != nil {
			mx.bulkheadInUse.Inc()
		}
		return false, nil
	}
	// Streams whose context ended just now may not have given their
	// permits back yet (see streamSet).
	if bh.streams.reap() && bh.tryAcquire() {
		if mx != nil {
			mx.bulkheadInUse.Inc()
		}
		return false, nil
	}
	ok, waited := bh.acquire(ctx)
	ended := over(ctx)
	if ok && ended != nil {
		// Handed a permit just as the context ended, or past its deadline
		// with its timer not yet run (gRPC would refuse to send the call):
		// the call will not be made, so the permit goes back at once
		// (TestAttack29DPermitHandedPastTheDeadlineGivesTheTokenBack).
		bh.release()
		ok = false
	}
	if !ok {
		if ended != nil {
			return true, statusFromContext(ended)
		}
		if mx != nil {
			mx.bulkheadRejections.Inc()
		}
		return true, bulkheadFullError(m.dependency(), m.policy.Name, int(bh.permits), waited)
	}
	if mx != nil {
		mx.bulkheadInUse.Inc()
	}
	return true, nil
}

// releasePermit gives back a permit taken with acquirePermit.
func (m *methodState) releasePermit() {
	m.bulkhead.release()
	if mx := m.metrics; mx != nil {
		mx.bulkheadInUse.Dec()
	}
}
