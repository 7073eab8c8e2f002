package runtime

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// IdempotencyKeyHeader is the metadata key that carries a method's
// idempotency key, identical on every attempt of a call.
const IdempotencyKeyHeader = "idempotency-key"

// Unary runs one unary call under the method's policy. Generated code calls
// it; call is the plain generated client's method, fallback the optional
// typed fallback.
//
// The layers, outside in: fallback, rate limit, bulkhead, overall limit,
// retry loop or hedging (retry budget, backoff with full jitter, never past
// the deadline), circuit breaker (admits each attempt, records its
// outcome), per-attempt timeout, the call. key is the request's idempotency key ("" for none): it is sent
// as idempotency-key metadata on every attempt, and without it a method that
// is not idempotent is never retried.
func Unary[Req, Resp any](ctx context.Context, m *Method, key string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error),
	fallback func(context.Context, *Req, error) (*Resp, error)) (*Resp, error) {
	return unaryWith(ctx, m, key, nil, req, opts, call, fallback)
}

// unaryWith is Unary and UnaryCached: cacheKey is nil for a call that does
// not go through the method's cache.
func unaryWith[Req, Resp any](ctx context.Context, m *Method, key string, cacheKey func(*Req) string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error),
	fallback func(context.Context, *Req, error) (*Resp, error)) (*Resp, error) {
	if m == nil {
		return nil, misuseError(codes.FailedPrecondition, "", "client not built: use the generated New…ResilientClient")
	}
	if ctx == nil {
		return nil, nilContextError(m.policy.Name)
	}
	if req == nil {
		return nil, nilRequestError(m.policy.Name)
	}
	if err := ctx.Err(); err != nil {
		// Already over: answered here, before any layer: no shared cached
		// call started, no token, permit or budget request, no fallback.
		return nil, statusFromContext(err)
	}
	var resp *Resp
	var err error
	stale := false
	if m.cache != nil && cacheKey != nil {
		resp, err, stale = cached(ctx, m, key, cacheKey(req), req, opts, call)
	} else {
		resp, err = unary(ctx, m, key, nil, req, opts, call)
	}
	if err == nil {
		if !stale && m.client.events != nil && m.fallbackSeen.Load() != 0 {
			m.fallbackSeen.Store(0) // the episode of fallbacks is over
		}
		return resp, nil
	}
	if fallback != nil && fallbackApplies(ctx, err) {
		if m.metrics != nil || m.client.events != nil {
			m.fellBack(err)
		}
		fresp, ferr := fallback(ctx, req, err)
		if fresp == nil && ferr == nil {
			// Neither an answer nor an error: the failure is not turned
			// into a success without a response; the call's error stands.
			return nil, err
		}
		return fresp, ferr
	}
	return resp, err
}

// fellBack counts a fallback and reports it once per episode and cause.
func (m *Method) fellBack(err error) {
	m.fellBackTo(causeOf(err, status.Code(err)), err)
}

// fellBackTo counts an answer given for a failed call (by the fallback,
// or by the cache, stale) and reports it once per episode and cause.
func (m *Method) fellBackTo(cause int, err error) {
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

// unary is Unary without the checks and the fallback. wait is nil for a
// call; for a cache's shared call it is the context of its waiting
// (for a token, a permit, a backoff, the next hedged copy) and of the
// decision to send another attempt, cut when its last caller leaves,
// while an attempt already sent runs on under ctx.
func unary[Req, Resp any](ctx context.Context, m *Method, key string, wait context.Context, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error)) (*Resp, error) {
	p := m.policy
	mx := m.metrics
	admit := ctx
	if wait != nil {
		admit = wait
	}
	if m.limiter != nil {
		if err := m.takeToken(admit); err != nil {
			return nil, err
		}
	}
	if m.bulkhead != nil {
		if err := m.acquirePermit(admit); err != nil {
			return nil, err
		}
		defer m.releasePermit()
	}
	if p.OverallTimeout > 0 {
		var cancel context.CancelFunc
		if ctx, cancel = shorten(ctx, p.OverallTimeout); cancel != nil {
			defer cancel()
		}
	}
	if key == "" && p.GenerateIdempotencyKey {
		key = NewIdempotencyKey()
	}
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, IdempotencyKeyHeader, key)
	}
	if p.Hedging != nil {
		return hedged(ctx, m, wait, req, opts, call)
	}
	shared := wait != nil
	if !shared {
		wait = ctx
	}
	c := m.client
	retry := p.Retry
	retries := retry != nil && retry.MaxAttempts > 1 && (p.Idempotent || key != "")
	if retries && c.events != nil {
		m.budgetRecovered()
	}
	var last error
	for attempt := 1; ; attempt++ {
		if shared && wait.Err() != nil {
			// A shared call whose callers all left: no attempt for nobody.
			return nil, firstOf(last, wait)
		}
		aopts := opts
		var slot *trailerSlot
		if retries {
			// The server's pushback travels in the trailer: asked for only
			// where it can change what happens next.
			slot = withTrailer(opts)
			aopts = slot.opts
		}
		var at int64
		resp, err, refused, retryAfter, timedOut := attemptOnce(ctx, m, req, aopts, call, &at)
		if retries && attempt == 1 && !refused {
			// The request is counted with the clock reading the attempt
			// already made: one read of the clock per attempt, not two.
			if at == 0 {
				at = c.now()
			}
			m.budget.request(at)
		}
		var push time.Duration
		var pushed bool
		if slot != nil {
			if err != nil {
				push, pushed = Pushback(err, slot.md)
			}
			slot.put()
		}
		if refused && err != nil {
			// Refused by an adaptive layer: final and local, like an open
			// breaker, with the last real error as its cause.
			return nil, withCause(err, last)
		}
		if refused {
			m.breakerRefused(attempt > 1)
			// An open breaker is a final answer, not something to retry.
			return nil, circuitOpenError(m.dependency(), p.Name, retryAfter, last)
		}
		if mx != nil && attempt > 1 {
			mx.retries[retryMade].Inc()
		}
		if err == nil {
			return resp, nil
		}
		if timedOut {
			err = attemptTimeoutError(m.dependency(), p.Name, attempt, p.Timeout, err)
		}
		last = err
		if ctx.Err() != nil {
			return nil, ended(ctx, err)
		}
		if !retries || !retryable(retry.RetryableCodes, err, timedOut) {
			return nil, err
		}
		if pushed && push < 0 {
			if mx != nil && attempt < retry.MaxAttempts {
				mx.retries[retryPushback].Inc()
			}
			return nil, err // the server said not to retry
		}
		if attempt >= retry.MaxAttempts {
			return nil, retriesExhaustedError(m.dependency(), p.Name, attempt, "attempts", err)
		}
		pause := Backoff(retry, attempt)
		if pushed {
			pause = push // the server knows better when it can take the call
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= pause {
			if mx != nil {
				mx.retries[retryDeadline].Inc()
			}
			return nil, err // the retry could not start before the deadline
		}
		if !m.budget.tryRetry(c.now()) {
			err = budgetExhaustedError(m.dependency(), p.Name, err)
			m.budgetRefused(err)
			return nil, err
		}
		if !sleep(wait, pause) {
			return nil, ended(ctx, err)
		}
	}
}

// firstOf is what a shared call whose callers all left ends with: the
// last real error, or else the cancellation (which nobody reads).
func firstOf(last error, wait context.Context) error {
	if last != nil {
		return last
	}
	return statusFromContext(wait.Err())
}

// retryable reports whether an attempt that failed with err may be
// repeated (or, for hedging, followed by the next copy): its code is
// listed, and a DEADLINE_EXCEEDED only
// when the attempt's own timeout expired (timedOut). A server that answers
// DEADLINE_EXCEEDED itself has given up on the request below it; a repeat
// would give up again.
func retryable(listed CodeSet, err error, timedOut bool) bool {
	c := status.Code(err)
	return listed.Has(c) && (c != codes.DeadlineExceeded || timedOut)
}

// ended returns what a call whose context ended tells its caller: Canceled
// when the caller cancelled, whatever the attempt came back with; after
// the deadline, the last real error, last.
func ended(ctx context.Context, last error) error {
	if err := ctx.Err(); errors.Is(err, context.Canceled) {
		return statusFromContext(err)
	}
	return last
}

// breakerRefused counts an attempt the breaker refused; retry says it was
// not the call's first (a retry, or a hedged copy after the first).
func (m *Method) breakerRefused(retry bool) {
	if mx := m.metrics; mx != nil {
		mx.breakerRejections.Inc()
		if retry {
			mx.retries[retryBreaker].Inc()
		}
	}
}

// attemptOnce makes one attempt through the adaptive layers (throttler,
// concurrency limit), the breaker and the per-attempt timeout. refused is
// true when one of them did not let it through: an adaptive layer's
// refusal is err, the breaker's is a nil err with how long the refusal is
// expected to last. timedOut is true when the
// attempt failed after its own per-attempt timeout expired, while ctx
// still had time: the DEADLINE_EXCEEDED it brings back is the runtime's,
// not the server's nor the caller's. When the attempt read the clock at
// its end, the reading is left in *at for the caller to reuse.
func attemptOnce[Req, Resp any](ctx context.Context, m *Method, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error), at *int64) (resp *Resp, err error, refused bool, retryAfter time.Duration, timedOut bool) {
	// Without a breaker or metrics an attempt holds nothing and counts
	// nowhere, and neither check below has anything to protect.
	counted := m.breaker != nil || m.metrics != nil
	if counted {
		if cerr := ctx.Err(); cerr != nil {
			return nil, statusFromContext(cerr), false, 0, false // never sent: counts for nothing
		}
	}
	// The adaptive layers, in front of the breaker: their refusal is final
	// and local, and takes no breaker probe.
	var g gate
	guarded := m.throttle != nil || m.concurrency != nil
	if guarded {
		if cerr := ctx.Err(); cerr != nil && !counted {
			return nil, statusFromContext(cerr), false, 0, false // never sent: counts for nothing
		}
		var gerr error
		if g, gerr = m.enter(); gerr != nil {
			return nil, gerr, true, 0, false
		}
	}
	ticket, start, retryAfter, ok := m.admit()
	if !ok {
		if guarded {
			m.leaveRefused(g)
		}
		return nil, nil, true, retryAfter, false
	}
	left := false
	if guarded {
		defer m.leaveUnlessDone(&left, g)
	}
	// A panic in the call (an interceptor, a codec) still gives back the
	// ticket and is counted, then goes on to the caller.
	settled := false
	if counted {
		defer m.settleUnlessDone(ctx, &settled, ticket, start)
	}
	actx := ctx
	own := false // actx has a timeout of its own, shorter than ctx's
	if t := m.policy.Timeout; t > 0 {
		var cancel context.CancelFunc
		if actx, cancel = shorten(ctx, t); cancel != nil {
			own = true
			defer cancel()
		}
	}
	resp, err = call(actx, req, opts...)
	settled = true
	seen := unsent(err) // what the breaker and the adaptive layers are told
	*at = m.settle(ctx, ticket, start, seen)
	if guarded {
		left = true
		m.leave(ctx, g, seen, *at)
	}
	if err != nil && own && status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil {
		timedOut = ownTimeout(actx)
	}
	return resp, err, false, 0, timedOut
}

// ownTimeout reports whether the attempt's own context, actx, has reached
// its deadline. gRPC may report DEADLINE_EXCEEDED a little before the
// context's timer has marked it done, so the deadline is compared too.
func ownTimeout(actx context.Context) bool {
	if actx.Err() == context.DeadlineExceeded {
		return true
	}
	dl, ok := actx.Deadline()
	return ok && !time.Now().Before(dl)
}

// shorten returns ctx limited to d from now, or ctx itself (and a nil
// cancel) when its deadline is already as short: no context is made for
// nothing.
func shorten(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, nil
	}
	return context.WithTimeout(ctx, d)
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
// answer of the dependency (NOT_FOUND, INVALID_ARGUMENT, …) and not the
// caller's own cancellation.
func fallbackApplies(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	return !isAnswer(status.Code(err))
}

// isAnswer reports whether a code is the dependency's answer to the
// request rather than a failure to give one: repeating the request would
// give the same answer.
func isAnswer(c codes.Code) bool { return answers.Has(c) }

// answers are the codes Validate refuses as retryable (answerCodes), plus
// OK, CANCELLED and ABORTED (a conflict: the dependency's answer, though a
// method may list it as retryable).
var answers = answerCodes | CodesOf(codes.OK, codes.Canceled, codes.Aborted)
