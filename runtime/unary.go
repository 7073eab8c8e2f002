package runtime

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
)

// IdempotencyKeyHeader is the metadata key that carries a method's
// idempotency key, identical on every attempt of a call.
const IdempotencyKeyHeader = contract.IdempotencyKeyHeader

// callUnary runs one unary call under the method's policy: it is what
// UnaryHandle.Call does once it has refused a nil handle, context or
// request (see refuse) and read the request's keys. key is the
// request's idempotency key ("" for none); cacheKey is nil for a call that
// does not go through the method's cache (see cached).
func callUnary[Req, Resp any](ctx context.Context, m *methodState, key string, cacheKey func(*Req) string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error),
	fallback func(context.Context, *Req, error) (*Resp, error)) (*Resp, error) {
	now, err := overAt(ctx)
	if err != nil {
		// Already over: answered here, before any layer: no shared cached
		// call started, no token, permit or budget request, no fallback.
		return nil, statusFromContext(err)
	}
	var resp *Resp
	fromDependency := true
	if m.cache != nil && cacheKey != nil {
		resp, fromDependency, err = cached(ctx, m, key, cacheKey(req), req, opts, call)
	} else {
		resp, err = unary(ctx, m, key, nil, &invocation[Req, Resp]{req: req, opts: opts, call: call, start: m.startOf(now)})
	}
	if err == nil {
		// Only the dependency's answer ends the episode of fallbacks: a
		// fresh hit of one key says nothing of it, and would have every
		// stale answer of another key reported again.
		if fromDependency && m.client.events != nil && m.fallbackSeen.Load() != 0 {
			m.fallbackSeen.Store(0) // the episode of fallbacks is over
		}
		return resp, nil
	}
	if fallback != nil && fallbackApplies(ctx, err) {
		fresp, ferr := fallback(ctx, req, err)
		if fresp == nil && ferr == nil {
			// Neither an answer nor an error: the failure is not turned
			// into a success without a response; the call's error stands,
			// and the fallback, which answered nothing, is not counted
			// (nor when it panicked).
			return nil, err
		}
		if m.metrics != nil || m.client.events != nil {
			m.fellBack(err)
		}
		return fresp, ferr
	}
	return resp, err
}

// fellBack counts a fallback and reports it once per episode and cause.
func (m *methodState) fellBack(err error) {
	m.fellBackTo(causeOf(err, status.Code(err)), err)
}

// fellBackTo counts an answer given for a failed call (by the fallback,
// or by the cache, stale) and reports it once per episode and cause.
func (m *methodState) fellBackTo(cause int, err error) {
	if m.metrics != nil {
		m.metrics.fallbacks.get(cause).Inc()
	}
	ev := m.client.events
	if ev == nil || cause >= 32 {
		return
	}
	bit := uint32(1) << cause
	if m.fallbackSeen.Load()&bit != 0 || m.fallbackSeen.Or(bit)&bit != 0 {
		return
	}
	ev.emit(Event{Kind: EventFallback, Dependency: m.dependency(), Method: m.policy.Name, Cause: causeName(cause), Err: err})
}

// unary is callUnary without the checks, the cache and the fallback: the
// rate limit, the bulkhead, the overall limit and the idempotency key
// around the retry loop (retried) or hedging (hedged). wait is nil for a
// call; for a cache's shared call it is the context of its waiting (for a
// token, a permit, a backoff, the next hedged copy) and of the decision to
// send another attempt, cut when its last caller leaves, while an attempt
// already sent runs on under ctx.
func unary[Req, Resp any](ctx context.Context, m *methodState, key string, wait context.Context, in *invocation[Req, Resp]) (*Resp, error) {
	p := m.policy
	admit := ctx
	if wait != nil {
		admit = wait
	}
	if m.limiter != nil {
		if err := m.takeToken(admit); err != nil {
			return nil, err
		}
		in.start = time.Time{} // the token may have been waited for
	}
	if bh := m.bulkhead; bh != nil {
		// A free permit of a bulkhead nobody counts is taken here, without
		// a call; acquirePermit does the rest.
		if m.metrics != nil || !bh.takeFree() {
			queued, err := m.acquirePermit(admit)
			if err != nil {
				if m.limiter != nil {
					m.limiter.giveBack() // the call is not sent
				}
				return nil, err
			}
			if queued {
				in.start = time.Time{} // the call's start is past
			}
		}
		defer m.releasePermit()
	}
	// The overall limit starts once the call holds its token and its
	// permit: the waits for them are bounded by their own max_wait and the
	// caller. A cache's shared call without an OverallTimeout is bounded
	// the same way by the limit of its attempts (in.limit, see fetch).
	limit := p.OverallTimeout
	if in.limit > 0 {
		limit = in.limit
	}
	if limit > 0 {
		var cancel context.CancelFunc
		if ctx, cancel = shorten(ctx, limit, in.start); cancel != nil {
			defer cancel()
		}
	}
	if key == "" && p.GenerateIdempotencyKey {
		key = newIdempotencyKey()
	}
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, IdempotencyKeyHeader, key)
	}
	var resp *Resp
	var err error
	if p.Hedging != nil {
		resp, err = hedged(ctx, m, wait, in)
	} else {
		resp, err = retried(ctx, m, key != "", wait, in)
	}
	if err != nil && in.limit > 0 && status.Code(err) == codes.DeadlineExceeded &&
		!errors.Is(err, ErrAttemptTimeout) && ownTimeout(ctx) {
		// The shared call's limit is made of the attempts' (or copies')
		// own timeouts, and cut the one that ran when it expired, which
		// the same call without the cache ends by its timeout: it matches
		// ErrAttemptTimeout as that does.
		err = sharedCallBoundError(m.dependency(), p.Name, in.limit, p.Timeout, err)
	}
	return resp, err
}

// invocation is one call of the plain client's method as each of its
// attempts repeats it: the request, the caller's options and the method.
// The layers pass it down by pointer, from the frame of the call's entry
// (UnaryHandle.Call, or a cache's shared call): one argument where there
// were three, on every call of every layer.
type invocation[Req, Resp any] struct {
	req  *Req
	opts []grpc.CallOption
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error)
	// copiesSent is, for a hedged call's copy, the count of the call's
	// copies let through (by the adaptive layers and the breaker) so far,
	// nil for every other attempt. The first copy let through, whichever
	// its number, is the call's request for the retry budget; each one
	// after it is a hedged copy sent, in retries_total{outcome="hedge"}
	// (see hedged): a copy the client refused itself was not sent.
	copiesSent *atomic.Int32
	// limit is a cache's shared call's bound when the method has no
	// OverallTimeout (see fetch), applied as one, once the call is
	// admitted; 0 for every other call.
	limit time.Duration
	// start is the clock reading over took at the call's start (only a
	// caller with a deadline has one), for the call's first attempt to
	// count its timeout from: one clock read fewer per call. It is zero
	// for every other attempt, and once the call may have waited (for a
	// token or a permit) or is hedged; attemptInto takes it once. A client
	// with a logger or observers never sets it: they run on the caller's
	// goroutine, for as long as they take, between the call's start and
	// its first attempt (a breaker's move to half-open in the attempt's
	// admission, the budget's recovery), and that time is not the
	// attempt's to lose (TestAttack30bSlowObserverAtHalfOpenShortensTheProbesTimeout).
	start time.Time
}

// startOf is the invocation.start of a call whose deadline check read now:
// now, or zero in a client with a logger or observers.
func (m *methodState) startOf(now time.Time) time.Time {
	if m.client.events != nil {
		return time.Time{}
	}
	return now
}

// copyAdmitted counts a hedged copy let through, sent the copies of its
// call let through so far: the first is the call's request for the retry
// budget, any other a hedged copy sent.
func (m *methodState) copyAdmitted(sent *atomic.Int32) {
	if sent.Add(1) == 1 {
		m.budget.request(m.client.now())
		return
	}
	if mx := m.metrics; mx != nil {
		mx.retries[retryHedge].Inc()
	}
}

// attemptEnd is how one attempt ended, besides its answer and error.
type attemptEnd struct {
	// refused: the breaker did not let the attempt through; retryAfter is
	// how long the refusal is expected to last. Or an adaptive layer (the
	// throttler, the concurrency limit) refused it: the attempt's error is
	// then that refusal.
	refused    bool
	retryAfter time.Duration
	// timedOut: the attempt failed after its own per-attempt timeout
	// expired, while ctx still had time: the DEADLINE_EXCEEDED it brings
	// back is the runtime's, not the server's nor the caller's.
	timedOut bool
	// at is a clock reading the attempt took (its end, or the start its
	// timeout counts from), for the caller to reuse; 0 when it took none.
	at int64
	// push is what the server said about retrying a failed attempt
	// (Pushback), when pushed; only an attempt that asked for the trailer
	// (heard) reads it.
	push   time.Duration
	pushed bool
	// local: the attempt failed on the client's side, or by a size limit
	// (see unsent): it would fail the same way again, so it is not
	// repeated.
	local bool
	// mark is the Guard's refusal mark pushback read of the failure
	// (refusalMarked), when heard.
	mark refusalMark
	// sent: every layer let the attempt through and it was handed to
	// gRPC. A repeat charged to the retry budget and not sent (refused, or
	// its context over first) is given back.
	sent bool
}

// attemptOnce makes one attempt through the adaptive layers (throttler,
// concurrency limit), the breaker and the per-attempt timeout, and says how
// it ended besides its answer. With heard (a call that retries or hedges,
// where the server's word can change what happens next) it asks for the
// attempt's trailer and reads the server's pushback of a failure into
// end.push.
func attemptOnce[Req, Resp any](ctx context.Context, m *methodState, in *invocation[Req, Resp], heard bool) (*Resp, attemptEnd, error) {
	var end attemptEnd
	resp, err := attemptInto(ctx, m, in, heard, &end)
	return resp, end, err
}

// attemptInto is attemptOnce writing how the attempt ended into *end, which
// must be zero: the retry loop's own, where a result of that size would be
// copied out of every return.
func attemptInto[Req, Resp any](ctx context.Context, m *methodState, in *invocation[Req, Resp], heard bool, end *attemptEnd) (*Resp, error) {
	// Without a breaker, metrics or adaptive layer an attempt holds nothing
	// and counts nowhere, and the check below has nothing to protect.
	counted, guarded := m.hot.counted, m.hot.guarded
	start := in.start // the call's start, for its first attempt only
	if !start.IsZero() {
		in.start = time.Time{}
	}
	if counted || guarded {
		if cerr := ctx.Err(); cerr != nil {
			return nil, statusFromContext(cerr) // never sent: counts for nothing
		}
	}
	// The adaptive layers, in front of the breaker: their refusal is final
	// and local, and takes no breaker probe.
	var g gate
	if guarded {
		var gerr error
		if g, gerr = m.enter(); gerr != nil {
			end.refused = true
			return nil, gerr
		}
	}
	// What the adaptive layers gave goes back however the attempt ends
	// before it is judged: the breaker's refusal, or a panic, in the
	// breaker's admission (an observer of its transition to half-open) as
	// in the call.
	left := false
	if guarded {
		defer m.leaveUnlessDone(&left, g)
	}
	var a attemptState
	var retryAfter time.Duration
	var ok bool
	if a.tk, retryAfter, ok = m.admit(); !ok {
		end.refused, end.retryAfter = true, retryAfter
		return nil, nil
	}
	end.sent = true
	if in.copiesSent != nil {
		m.copyAdmitted(in.copiesSent)
	}
	// A panic in the call (an interceptor, a codec) still gives back the
	// ticket and is counted, then goes on to the caller; where that
	// changes nothing (panicHeld), the guard is not set.
	if counted && m.panicHeld(a.tk) {
		defer m.settleUnlessDone(&a)
	}
	actx := ctx
	own := false // actx has a timeout of its own, shorter than ctx's
	if t := m.policy.Timeout; t > 0 {
		var cancel context.CancelFunc
		// The budget counts the call's first attempt too: it takes the
		// attempt's start where the breaker and the metrics take nothing.
		if actx, cancel, a.sp = m.client.attemptContext(ctx, t, m.hot.timed, start); cancel != nil {
			own = true
			defer cancel()
		}
	}
	if !a.sp.known && m.hot.measures {
		a.sp = span{start: m.client.now(), known: true} // the duration is measured
	}
	if guarded {
		g.begin(m, a.sp)
	}
	opts := in.opts
	var slot *trailerSlot
	if heard {
		slot, opts = withTrailer(opts)
	}
	resp, err := in.call(actx, in.req, opts...)
	a.settled = true
	if slot != nil {
		switch {
		case err == nil && actx.Err() == nil:
			slot.put()
		case err == nil || detached(actx, err):
			// The call may have returned before gRPC did (an interceptor
			// that gives up on its invoker when the attempt's context
			// ends, with an error or none): gRPC may still write the
			// trailer, so the slot is neither read nor given back to the
			// pool. (An interceptor that gave up saw the context's end:
			// for a success, Err says so without a clock read.)
		default:
			end.push, end.pushed, a.mark = pushback(err, slot.md)
			end.mark = a.mark
			slot.put()
		}
	}
	seen := unsent(err) // what the breaker and the adaptive layers are told
	if seen != nil {
		_, end.local = seen.(*clientFault)
	}
	if seen == nil && m.hot.countsEarly && m.settledEarly(actx, &a) {
		end.at = a.sp.start
	} else {
		end.at = m.settle(ctx, actx, &a, seen)
	}
	if end.at == 0 && a.sp.known {
		end.at = a.sp.start
	}
	if guarded {
		left = true
		m.leave(ctx, g, seen, end.at, a.mark)
	}
	if err != nil && own && status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil {
		end.timedOut = ownTimeout(actx)
	}
	return resp, err
}

// detached reports whether an attempt's call that failed with err may
// have returned before gRPC finished it: its context, actx, is over and
// err says so (a context's code, an error wrapping the context's, or an
// error that is not a gRPC status at all), as an interceptor that stops
// waiting for its invoker at the context's end returns. A code of the
// server's (UNAVAILABLE with a pushback) is only known once gRPC has
// finished, and is read: one that came back just past the attempt's
// deadline still says "do not retry". So an interceptor that gives up and
// makes up a code of its own, wrapping nothing, is taken at its word
// (README, Pushback). (A bare context.Canceled reads as UNKNOWN to
// status.Code: checking the code alone, such a slot went back to the pool
// while gRPC could still write into it,
// TestAttackR18DetachingInterceptorLeavesOtherCallsTrailersAlone.)
func detached(actx context.Context, err error) bool {
	if actx.Err() == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s, ok := status.FromError(err)
	if !ok {
		return true
	}
	c := s.Code()
	return c == codes.DeadlineExceeded || c == codes.Canceled
}

// attemptState is what attemptOnce holds of its attempt for the breaker
// and the metrics: the breaker's ticket, the attempt's start, once known,
// whether the attempt was settled (its call returned), and what was read
// of its failure's shed mark.
type attemptState struct {
	tk      ticket
	sp      span
	settled bool
	mark    refusalMark // what pushback read of the failure's refusal mark, if it read it
}

// ownTimeout reports whether actx (an attempt's own context, or a call's:
// see judgeAdaptive) has reached its deadline. gRPC may report DEADLINE_EXCEEDED a little before the
// context's timer has marked it done, so the deadline is compared too.
func ownTimeout(actx context.Context) bool {
	if actx.Err() == context.DeadlineExceeded {
		return true
	}
	dl, ok := actx.Deadline()
	return ok && !time.Now().Before(dl)
}

// over returns the error of a context that is over: its Err, or
// context.DeadlineExceeded once its deadline has passed though its timer
// has not run yet (Err still nil, as a context.WithDeadline is on a
// loaded machine until its goroutine is scheduled). gRPC reads the
// deadline itself and refuses to send such a call, with
// DEADLINE_EXCEEDED: taken for live, the call would take a token, a
// permit and a probe, be counted by the breaker as the dependency's
// failure and be given to the fallback, though nothing was sent
// (TestAttack26APastDeadlineCallsCountForNothing).
func over(ctx context.Context) error {
	_, err := overAt(ctx)
	return err
}

// overAt is over, also returning the clock reading it compared the
// deadline with: zero when ctx has no deadline (nothing was read). A
// call's first attempt counts its timeout from that reading (see
// invocation.start) instead of reading the clock again.
func overAt(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, nil
	}
	now := time.Now()
	if !now.Before(dl) {
		return now, context.DeadlineExceeded
	}
	return now, nil
}

// shorten returns ctx limited to d from now, or ctx itself (and a nil
// cancel) when its deadline is already as short: no context is made for
// nothing. now is a clock reading to count d from, or zero to read the
// clock (once: context.WithTimeout under a deadline would read it twice
// more).
func shorten(ctx context.Context, d time.Duration, now time.Time) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithTimeout(ctx, d)
	}
	if now.IsZero() {
		now = time.Now()
	}
	if dl.Sub(now) <= d {
		return ctx, nil
	}
	return context.WithDeadline(ctx, now.Add(d))
}

// sleep waits for d or until ctx ends; it reports whether the wait ran to
// its end.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fallbackApplies reports whether a failed call may be answered by the
// fallback: a failure of the dependency or a refusal of the runtime, not an
// answer of the dependency (NOT_FOUND, INVALID_ARGUMENT, …), not the
// caller's own cancellation, and not a failure on the client's side (see
// standsFor).
func fallbackApplies(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	return standsFor(err)
}

// standsFor reports whether a fallback or a stale answer may stand in for
// a call that failed with err: a failure of the dependency or a refusal of
// the runtime. Not an answer of the dependency, and not a failure on the
// client's side (a message that does not marshal or is past a size limit,
// a call gRPC refused to send, a closed ClientConn: see unsent), which
// says nothing of the dependency (most never reached it; a response past
// the caller's receive limit was the dependency's work, thrown away) and
// would fail the same way on every call: standing in for it would hide
// the caller's defect behind a degraded answer. Nor is an error of the
// runtime's own without a sentinel: a bad use of the API (an answer's
// code, INVALID_ARGUMENT or FAILED_PRECONDITION), or a cache's shared
// call that runtime.Goexit ended (sharedCallGoexitError).
func standsFor(err error) bool {
	if isAnswer(status.Code(err)) {
		return false
	}
	if e, ok := err.(*Error); ok && e.Reason == nil {
		return false
	}
	_, local := unsent(err).(*clientFault)
	return !local
}

// isAnswer reports whether a code is the dependency's answer to the
// request rather than a failure to give one: repeating the request would
// give the same answer.
func isAnswer(c codes.Code) bool { return answers.Has(c) }

// answers are the codes Validate refuses as retryable (contract.AnswerCodes), plus
// OK, CANCELLED and ABORTED (a conflict: the dependency's answer, though a
// method may list it as retryable).
var answers = policy.CodesOf(contract.AnswerCodes...) | policy.CodesOf(codes.OK, codes.Canceled, codes.Aborted)
