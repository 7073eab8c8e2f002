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
	n  atomic.Int64 // len(m), read without the lock
	mu sync.Mutex
	m  map[*stream]struct{}
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
// they were counted for, as their AfterFunc would; it reports whether it
// ended any.
func (ss *streamSet) reap() bool {
	if ss.n.Load() == 0 {
		return false
	}
	var over []*stream
	ss.mu.Lock()
	for s := range ss.m {
		if s.ctx.Err() != nil {
			over = append(over, s)
		}
	}
	ss.mu.Unlock()
	for _, s := range over {
		s.finish(s.ctx.Err())
	}
	return len(over) > 0
}
