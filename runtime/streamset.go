package runtime

import (
	"sync"
	"sync/atomic"
)

// streamSet is the open streams that hold a permit of one bulkhead, or a
// half-open probe of one breaker (a breaker only streams go through). A
// stream learns that its context ended from context.AfterFunc, which runs
// on a goroutine of its own, a little after the caller's cancel returned;
// a call that finds the bulkhead full (or a stream that finds the probes
// out) meanwhile, such as a watcher that cancels its stream and opens the
// next at once, would be refused a permit (or a probe) that is as good as
// free. reap lets that call end such streams itself first:
// the stream's context, derived from the caller's, is already over when
// cancel returns.
type streamSet struct {
	n       atomic.Int64 // len(m), read without the lock
	reaping atomic.Bool  // a reap is scanning m: another finds what it finds
	mu      sync.Mutex
	m       map[*stream]struct{}
}

// add counts s among the streams holding a permit (or a probe).
func (ss *streamSet) add(s *stream) {
	ss.mu.Lock()
	if ss.m == nil {
		ss.m = map[*stream]struct{}{}
	}
	ss.m[s] = struct{}{}
	ss.n.Store(int64(len(ss.m)))
	ss.mu.Unlock()
}

// remove forgets s, which gave its permit (or its probe) back.
func (ss *streamSet) remove(s *stream) {
	ss.mu.Lock()
	delete(ss.m, s)
	ss.n.Store(int64(len(ss.m)))
	ss.mu.Unlock()
}

// reap ends the streams whose context is over and that still hold what
// they were counted for, as their AfterFunc would, except an ending that
// may run an observer, which is left to the stream's own goroutines (only
// the permit goes back here: see stream.reaped); it reports whether it
// found any. It scans every stream of the set, so while one call scans,
// another refused at the same moment does not scan it again: under a
// storm of refusals on a bulkhead full of streams, the scans would hold
// the set's mutex (which opening and closing streams take) back to back.
func (ss *streamSet) reap() bool {
	if ss.n.Load() == 0 || !ss.reaping.CompareAndSwap(false, true) {
		return false
	}
	defer ss.reaping.Store(false)
	var over []*stream
	ss.mu.Lock()
	for s := range ss.m {
		if s.ctx.Err() != nil {
			over = append(over, s)
		}
	}
	ss.mu.Unlock()
	for _, s := range over {
		s.reaped()
	}
	return len(over) > 0
}
