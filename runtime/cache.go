package runtime

import (
	"container/list"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime/policy"
)

// JoinKey makes one cache key of several request fields, unambiguously:
// each part is preceded by its length in decimal and ":". It allocates
// the key alone, once: generated code calls it on every cached call.
func JoinKey(parts ...string) string {
	n := 0 // the key's length, so that it is allocated once
	for _, p := range parts {
		n += len(p) + len(":") + 1 // and the length's first digit
		for l := len(p); l >= 10; l /= 10 {
			n++ // and its others
		}
	}
	var b strings.Builder
	b.Grow(n)
	var digits [20]byte
	for _, p := range parts {
		b.Write(strconv.AppendInt(digits[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// cache is the bounded LRU map of one method's answers, with the calls in
// flight per key. It is written here rather than taken from
// golang.org/x/sync/singleflight (which counts no waiters, so a shared
// call could not stop when its last caller leaves) or
// hashicorp/golang-lru/v2/expirable (one TTL per cache where an entry has
// two, time.Now instead of the client's Clock, and a cleaning goroutine
// per cache): the README's development notes say more.
type cache struct {
	p       policy.Cache
	mu      sync.Mutex
	entries map[string]*list.Element // of *cacheEntry
	lru     list.List                // most recently used at the front
	flights map[string]*flight
	// abandoned are the flights every caller left (see leave) whose
	// attempt is still on the wire, by key: a success of a flight that
	// began after one supersedes it (see finish).
	abandoned map[string][]*flight
	// started numbers the flights in the order they began (guarded by
	// mu).
	started uint64
}

type cacheEntry struct {
	key string
	val any   // the *Resp, never handed out itself: callers get copies
	at  int64 // when it was fetched, nanoseconds since the client's base
}

// flight is one call shared by every caller of a key.
type flight struct {
	done     chan struct{}
	val      any
	err      error
	panicked any // what the call panicked with, re-raised in each caller

	// ctx carries the first caller's values, detached from every
	// caller's cancellation; cancel marks the flight abandoned when its
	// last waiter leaves: nothing more is started for it.
	ctx    context.Context
	cancel context.CancelFunc
	// startersOwn: the call failed on its starter's side (see
	// startersOwn), set before done is closed.
	startersOwn bool
	waiters     int    // callers waiting for it; guarded by cache.mu
	seq         uint64 // its place in the order the key's flights began
	// superseded: a flight of its key that began after it succeeded, so
	// that its own answer, if it comes, is an older reading (guarded by
	// cache.mu).
	superseded bool
}

func newCache(p policy.Cache) *cache {
	return &cache{p: p, entries: map[string]*list.Element{}, flights: map[string]*flight{}, abandoned: map[string][]*flight{}}
}

// get returns the value of key and when it was fetched.
func (c *cache) get(key string) (any, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.entries[key]
	if el == nil {
		return nil, 0, false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.val, e.at, true
}

// join returns the flight of key, counting the caller among its waiters,
// and true when the caller must start it. A new flight's context keeps
// ctx's values (metadata, priority) but not its cancellation.
func (c *cache) join(ctx context.Context, key string) (*flight, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.flights[key]; f != nil {
		f.waiters++
		return f, false
	}
	c.started++
	f := &flight{done: make(chan struct{}), waiters: 1, seq: c.started}
	f.ctx, f.cancel = context.WithCancel(ownMetadata(context.WithoutCancel(ctx)))
	c.flights[key] = f
	return f, true
}

// ownMetadata returns ctx carrying a copy of its outgoing metadata, for a
// shared call that may outlive its starter: metadata.NewOutgoingContext
// keeps the starter's map itself, which the starter owns again once it
// returns (-race saw gRPC read it as the starter wrote it:
// TestAttack24aSharedCallAndTheStartersMetadataMap). A context without
// outgoing metadata is returned as it is. gRPC's copy lowercases the keys
// (as gRPC itself does on receipt of every other spelling).
func ownMetadata(ctx context.Context) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx) // a copy
	if !ok {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// leave takes a caller who stopped waiting off the flight of key. The last
// to leave abandons the flight: the shared call starts nothing more (no
// wait for a token, a permit or a backoff, no further attempt or copy),
// while an attempt already sent runs to its end and its answer is kept.
// The flight is forgotten: the next caller of the key starts a new one.
func (c *cache) leave(key string, f *flight) {
	c.mu.Lock()
	f.waiters--
	cut := f.waiters == 0 && c.flights[key] == f
	if cut {
		delete(c.flights, key)
		c.abandoned[key] = append(c.abandoned[key], f)
	}
	c.mu.Unlock()
	if cut {
		f.cancel()
	}
}

// finish ends the flight of key with its result, keeping a success. It
// reports whether a caller still waited for it (one who leaves after this
// finds the flight done, see cached). The success of a flight that
// another flight of key began after and succeeded before (f superseded)
// is not kept: an abandoned flight whose attempt on the wire answers late
// (see leave) brings the reading of an older request, which must not
// replace the newer one callers already got, nor stand for it once that
// one was evicted.
func (c *cache) finish(key string, f *flight, val any, err error, now int64) (waited bool) {
	c.mu.Lock()
	waited = f.waiters > 0
	if c.flights[key] == f {
		delete(c.flights, key)
	} else if left := c.abandoned[key]; len(left) != 0 {
		c.abandoned[key] = slices.DeleteFunc(left, func(o *flight) bool { return o == f })
		if len(c.abandoned[key]) == 0 {
			delete(c.abandoned, key)
		}
	}
	if err == nil && !f.superseded {
		for _, o := range c.abandoned[key] {
			o.superseded = o.superseded || o.seq < f.seq
		}
		if el := c.entries[key]; el != nil {
			e := el.Value.(*cacheEntry)
			e.val, e.at = val, now
			c.lru.MoveToFront(el)
		} else {
			c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, val: val, at: now})
			for c.lru.Len() > c.p.MaxEntries {
				oldest := c.lru.Back()
				c.lru.Remove(oldest)
				delete(c.entries, oldest.Value.(*cacheEntry).key)
			}
		}
	}
	// The flight is done before the lock is released: a waiter that
	// leaves after finish counted it (waited) takes the lock after this,
	// and so finds the flight done, and its panic, if any, to re-raise.
	// Closed after the unlock, a waiter leaving in between found neither
	// (TestAttack25cAWaiterFinishCountedSeesTheFlightDone): with waited
	// true the shared call did not panic on its own goroutine either, and
	// the panic was swallowed.
	f.val, f.err = val, err
	close(f.done)
	c.mu.Unlock()
	return waited
}

// cached runs a call through the method's cache, as policy.Cache says; key
// is the request's cache key (made by generated code from the method's
// key_fields, no reflection), idemKey its idempotency key. fromDependency
// reports an answer the dependency gave this call (the shared call's
// success), not the cache (a fresh hit, or a stale answer after a
// failure): only that one ends an episode of fallbacks.
func cached[Req, Resp any](ctx context.Context, m *methodState, idemKey, key string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error)) (resp *Resp, fromDependency bool, err error) {
	if err := ctx.Err(); err != nil {
		// Nobody to answer: no lookup, and above all no call.
		return nil, false, statusFromContext(err)
	}
	ch := m.cache
	c := m.client
	if val, at, ok := ch.get(key); ok && c.now()-at < int64(ch.p.FreshTTL) {
		m.cacheLookup(cacheHit)
		return copyOf(val.(*Resp)), false, nil
	}
	// Each call is counted once, by how it ends: stale when a stale answer
	// stands in for its failure (staleOf counts it), else a miss, its
	// panic included; never both.
	stale := false
	defer func() {
		if !stale {
			m.cacheLookup(cacheMiss)
		}
	}()
	for turn := 0; ; turn++ {
		if turn > 0 {
			if err := ctx.Err(); err != nil {
				// Gone before its turn: it starts no call, and its own
				// deadline may have the stale answer.
				return gaveUp[Resp](m, key, err, &stale)
			}
			if val, at, ok := ch.get(key); ok && c.now()-at < int64(ch.p.FreshTTL) {
				// An answer kept while it waited (an abandoned flight's,
				// late): what a new caller would get, without a call. The
				// call stays counted as the miss it was.
				return copyOf(val.(*Resp)), false, nil
			}
		}
		f, leader := ch.join(ctx, key)
		if leader {
			// The shared call may outlive this caller, who owns its request
			// and its options again once it returns and may reuse them for
			// another key: the call sends a copy of each, taken here,
			// before the caller can return.
			go fetch(m, f, idemKey, key, copyOf(req), sharedOptions(opts), call)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			ch.leave(key, f)
			select {
			case <-f.done:
				// The flight ended as the caller gave up, counting on it to
				// see its panic: a panic is never swallowed.
				if f.panicked != nil {
					panic(f.panicked)
				}
			default:
			}
			return gaveUp[Resp](m, key, ctx.Err(), &stale)
		}
		if f.panicked != nil {
			panic(f.panicked)
		}
		if f.err == nil {
			return copyOf(f.val.(*Resp)), true, nil
		}
		failed := f.err
		if !leader && f.startersOwn {
			// The shared call failed on the side of the caller that
			// started it (its metadata, its call options), which says
			// nothing of this caller's call. The flight is over (finish
			// forgot it): this caller joins the key again, and the first of
			// its waiters to do so starts the next flight with its own
			// values, which the others share, as they shared the first. A
			// caller making its own call instead would make one call per
			// waiter at once, the storm the single flight is for. Each
			// turn's flight is another caller's, who does not come back
			// (it got its own fault), so the turns end.
			continue
		}
		if standsFor(failed) {
			if resp, ok := staleOf[Resp](m, key, failed); ok {
				stale = true
				return resp, false, nil
			}
		}
		return nil, false, failed
	}
}

// sharedOptions returns the options a shared call is made with, a copy of
// the first caller's opts without those that write into that caller's
// memory (header, trailer, peer; by value, by pointer or embedded in an
// option of the program's: see targetOf), since that caller may be gone.
func sharedOptions(opts []grpc.CallOption) []grpc.CallOption {
	kept := opts[:0:0]
	for _, o := range opts {
		if targetOf(o) == writesNothing {
			kept = append(kept, o)
		}
	}
	return kept
}

// gaveUp is the end of a cached call whose caller's context ended (err,
// its error) before the shared call answered it: the caller's own
// deadline ran out while the dependency had not answered, so for this
// caller the call failed, and a stale answer is better than none (counted
// so: *stale). A caller who cancelled wants nothing.
func gaveUp[Resp any](m *methodState, key string, err error, stale *bool) (*Resp, bool, error) {
	failed := statusFromContext(err)
	if errors.Is(err, context.DeadlineExceeded) {
		if resp, ok := staleOf[Resp](m, key, failed); ok {
			*stale = true
			return resp, false, nil
		}
	}
	return nil, false, failed
}

// staleOf returns a copy of the answer kept for key when it is younger
// than StaleTTL, counting it as served stale after err.
func staleOf[Resp any](m *methodState, key string, err error) (*Resp, bool) {
	val, at, ok := m.cache.get(key)
	if !ok || m.client.now()-at >= int64(m.cache.p.StaleTTL) {
		return nil, false
	}
	m.cacheLookup(cacheStale)
	m.fellBackTo(causeStaleCache, err)
	return copyOf(val.(*Resp)), true
}

// fetch makes the shared call of a flight, with the first caller's values
// and the method's own limit, starting nothing once every caller left;
// req and opts are copies of that caller's (opts without the options that
// write into its memory: see sharedOptions), since that caller may be
// gone.
func fetch[Req, Resp any](m *methodState, f *flight, idemKey, key string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error)) {
	defer f.cancel()
	defer func() {
		r := recover()
		select {
		case <-f.done:
			// The call came to its end (finish below): nothing to hand on.
			// A panic after that (none is expected) goes on here.
			if r != nil {
				panic(r)
			}
			return
		default:
		}
		if r != nil {
			// A panic in the call is the callers' to see, as if they had
			// made the call themselves, not a crash of a goroutine of the
			// runtime. With no caller left, nobody can see it: it goes on
			// here, on the call's own goroutine (a panic is never
			// swallowed). A hedged copy's panic reaches this goroutine as
			// any caller's (see hedgedCall.wait).
			f.panicked = r
			if !m.cache.finish(key, f, nil, status.Error(codes.Internal, "the shared call panicked"), m.client.now()) {
				panic(r)
			}
			return
		}
		// Neither a return nor a panic: runtime.Goexit ended this
		// goroutine (an interceptor's or an observer's t.FailNow, or a
		// hedged copy's, which hedgedCall.wait hands on here). The
		// goroutine ends, as the Goexit means it to, once this returns;
		// the call ends with it, so that its waiters do not wait for it
		// until their own contexts end (forever, without a deadline) and
		// the key's next caller starts a new call instead of joining this
		// one: each waiter gets sharedCallGoexitError's INTERNAL, a
		// fault on the client's side that neither a stale answer nor the
		// fallback stands in for, as for a panic
		// (TestCacheSharedCallGoexitEndsTheSharedCall). With no caller
		// left, the call is forgotten all the same
		// (TestCacheAbandonedSharedCallGoexitIsForgotten).
		m.cache.finish(key, f, nil, sharedCallGoexitError(m.dependency(), m.policy.Name), m.client.now())
	}()
	// fctx carries the attempts, and is never cut by the callers leaving:
	// an attempt already sent runs to its end, and its answer is kept for
	// the next caller. wait, cut when the last caller leaves, bounds what
	// would start work for nobody: waiting for a token, a permit, a
	// backoff, the next attempt or copy. The method's limit (bound.Call)
	// starts, as the same call's OverallTimeout does without the cache,
	// once the call holds its token and its permit: unary applies it (the
	// OverallTimeout itself, or in.limit), so that waiting for them eats
	// none of the attempts' time.
	fctx := context.WithoutCancel(f.ctx)
	in := &invocation[Req, Resp]{req: req, opts: opts, call: call}
	if p := m.policy; p.OverallTimeout == 0 && !bound.OneAttempt(p) {
		// The limit of a retried or hedged call without an OverallTimeout
		// is the bound of its attempts and the waits between them. A call
		// of one attempt gets none besides its OverallTimeout: its
		// attempt's own timeout cuts it, and a second limit of the same
		// length would leave the attempt no context of its own, its end
		// taken for the call's deadline, which the adaptive limit does not
		// count as a drop.
		in.limit = bound.Call(p)
	}
	wait, cut := context.WithCancel(fctx)
	defer cut()
	defer context.AfterFunc(f.ctx, cut)()
	var resp *Resp
	var err error
	if err = wait.Err(); err != nil {
		err = statusFromContext(err) // every caller left before it began
	} else {
		resp, err = unary(fctx, m, idemKey, wait, in)
	}
	var val any
	if err == nil {
		val = resp
	} else {
		f.startersOwn = startersOwn(f.ctx, err, req, opts)
	}
	m.cache.finish(key, f, val, err, m.client.now())
}

// copyOf returns a copy of a protobuf message, so that no caller can change
// what another caller, the cache or a shared call holds; other types are
// returned as they are.
func copyOf[Resp any](v *Resp) *Resp {
	if pm, ok := any(v).(proto.Message); ok {
		return any(proto.Clone(pm)).(*Resp)
	}
	return v
}
