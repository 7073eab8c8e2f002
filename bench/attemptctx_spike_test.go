package bench

// A spike (issue 11): a hand-written per-attempt context, to learn whether
// it is correct and cheaper than context.WithDeadline, around a no-op call,
// under the child grpc-go derives with context.WithCancel, and over a real
// loopback call. It lives in bench/ only; the runtime does not use it.
//
// What it gave (stop 22, go1.26.8, 2 shared cores, load 11–26, the
// quickest tenth of interleaved batches, medians of 28–36 runs): under a
// caller's context that never ends (context.Background), 61 ns less than
// time.Now + context.WithDeadline around a no-op call (245 vs 300 ns; 3
// allocations, 256 B, against 4 and 272 B) and 133 ns less with grpc-go's
// child, context.WithCancel, made, used and cancelled (540 vs 690 ns; 10
// allocations both, 672 B against 848 B). Under a caller's
// context.WithCancel it costs more, 72 and 43 ns (6 and 13 allocations
// against 4 and 10), for it must follow the parent through
// context.AfterFunc; the hybrid benchmark impl falls back to the stdlib
// there. Over a real loopback call (54 µs) no difference resolves.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is one attempt's context: its parent's values, a deadline of
// its own and a timer that ends it there, in one struct. Compared with
// context.WithDeadline it takes the clock reading its caller already made
// (no time.Until), returns no cancel closure (the attempt calls release)
// and keeps the children the context package derives from it (through its
// AfterFunc method) in a slot of its own instead of a map.
//
// A parent that can end is followed through context.AfterFunc(parent),
// since a context of another package cannot join a *cancelCtx's children.
type attemptCtx struct {
	parent   context.Context
	deadline time.Time
	state    atomic.Uint32 // live, or the index+1 in ctxErrs of how it ended
	done     atomic.Value  // chan struct{}, made on the first Done

	mu       sync.Mutex
	timer    *time.Timer // written before any other goroutine may read it, or under mu
	unparent func() bool // stops the parent's AfterFunc; under mu
	// The funcs registered by AfterFunc, under mu: the first in a slot of
	// its own (grpc-go registers one child per attempt), the others in a
	// map; ids tell a stop which registration is its own.
	seq     uint64
	firstID uint64
	first   func()
	more    map[uint64]func()
}

var (
	ctxErrs       = [...]error{context.Canceled, context.DeadlineExceeded}
	attemptClosed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
)

// withAttemptDeadline returns parent limited to d from now (a clock reading
// the caller made), or parent itself (and a nil *attemptCtx) when parent's
// deadline is already as short, as the runtime's attemptContext does.
func withAttemptDeadline(parent context.Context, now time.Time, d time.Duration) (context.Context, *attemptCtx) {
	if dl, ok := parent.Deadline(); ok && dl.Sub(now) <= d {
		return parent, nil
	}
	c := newAttemptCtx(parent, now, d)
	return c, c
}

// newAttemptCtx returns a context that ends at now+d, when parent ends, or
// at release, whichever comes first. d is the time left from now: the
// timer is set from it, without reading the wall clock again.
func newAttemptCtx(parent context.Context, now time.Time, d time.Duration) *attemptCtx {
	c := &attemptCtx{parent: parent, deadline: now.Add(d)}
	pd := parent.Done()
	if pd != nil {
		select {
		case <-pd:
			c.cancel(parent.Err(), false)
			return c
		default:
		}
	}
	if d <= 0 {
		c.cancel(context.DeadlineExceeded, false)
		return c
	}
	if pd == nil { // parent never ends: no one else sees c before it is returned
		c.timer = time.AfterFunc(d, c.expire)
		return c
	}
	c.mu.Lock()
	// f runs on a goroutine of its own once parent ends; it waits for mu.
	c.unparent = context.AfterFunc(parent, func() {
		c.cancel(parent.Err(), true)
	})
	c.timer = time.AfterFunc(d, c.expire)
	c.mu.Unlock()
	return c
}

func (c *attemptCtx) expire() { c.cancel(context.DeadlineExceeded, false) }

// release ends the attempt's context as its cancel func would: Canceled,
// the timer stopped, children cancelled, the parent's hook removed.
func (c *attemptCtx) release() { c.cancel(context.Canceled, true) }

// cancel ends c with err (Canceled or DeadlineExceeded), once. stopTimer
// is false only on the timer's own goroutine, which must not read c.timer
// (written without mu when parent cannot end). A cause is not kept:
// context.Cause(c) never asks c for one (it looks for the innermost
// *cancelCtx through Value, which finds the parent's), so c has no way to
// give its own.
func (c *attemptCtx) cancel(err error, stopTimer bool) {
	s := uint32(1)
	if err == context.DeadlineExceeded {
		s = 2
	}
	c.mu.Lock()
	if c.state.Load() != 0 {
		c.mu.Unlock()
		return
	}
	c.state.Store(s) // before done closes: Err waits for Done (below)
	if d, _ := c.done.Load().(chan struct{}); d != nil {
		close(d)
	} else {
		c.done.Store(attemptClosed)
	}
	var t *time.Timer
	if stopTimer {
		t = c.timer
	}
	first, more, unparent := c.first, c.more, c.unparent
	c.first, c.more, c.unparent = nil, nil, nil
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	// Outside mu: a child's cancel reads c.Err and context.Cause(c).
	if first != nil {
		first()
	}
	for _, f := range more {
		f()
	}
	if unparent != nil {
		unparent()
	}
}

func (c *attemptCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *attemptCtx) Done() <-chan struct{} {
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	d := make(chan struct{})
	c.done.Store(d)
	return d
}

func (c *attemptCtx) Err() error {
	s := c.state.Load()
	if s == 0 {
		return nil
	}
	<-c.Done() // closed at once, or by the cancel that set s
	return ctxErrs[s-1]
}

func (c *attemptCtx) Value(key any) any { return c.parent.Value(key) }

func (c *attemptCtx) String() string {
	return contextString(c.parent) + ".WithDeadline(" + c.deadline.String() + ")"
}

func contextString(c context.Context) string {
	if s, ok := c.(interface{ String() string }); ok {
		return s.String()
	}
	return "context"
}

// AfterFunc is the method the context package looks for on a parent that
// is not its own (propagateCancel, context.AfterFunc): it arranges f to be
// called once c ends and returns a stop that unregisters it. Unlike
// context.AfterFunc, f is called on the goroutine that ends c, not one of
// its own: the context package passes only its own child.cancel, which
// does not block, and context.AfterFunc(c, g) wraps g in a goroutine
// itself. So a child made by context.WithCancel(c) costs no goroutine.
// Only when c has already ended is f started on a goroutine: the context
// package calls AfterFunc holding the child's lock.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.state.Load() != 0 {
		// Already ended (a race the context package's select lost). f
		// runs on a goroutine of its own: propagateCancel calls AfterFunc
		// holding the child's lock, which f (child.cancel) takes.
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.seq++
	id := c.seq
	if c.first == nil {
		c.first, c.firstID = f, id
	} else {
		if c.more == nil {
			c.more = make(map[uint64]func())
		}
		c.more[id] = f
	}
	c.mu.Unlock()
	return func() bool { return c.unregister(id) }
}

func (c *attemptCtx) unregister(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first != nil && c.firstID == id {
		c.first = nil
		return true
	}
	if _, ok := c.more[id]; ok {
		delete(c.more, id)
		return true
	}
	return false
}
