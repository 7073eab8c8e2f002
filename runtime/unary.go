package runtime

import (
	"context"
	"errors"
	"strings"
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
		resp, err = unary(ctx, m, key, req, opts, call)
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
		return fallback(ctx, req, err)
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

// unary is Unary without the checks and the fallback.
func unary[Req, Resp any](ctx context.Context, m *Method, key string, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error)) (*Resp, error) {
	p := m.policy
	mx := m.metrics
	if m.limiter != nil {
		if err := m.takeToken(ctx); err != nil {
			return nil, err
		}
	}
	if m.bulkhead != nil {
		if err := m.acquirePermit(ctx); err != nil {
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
		return hedged(ctx, m, req, opts, call)
	}
	c := m.client
	retry := p.Retry
	retries := retry != nil && retry.MaxAttempts > 1 && (p.Idempotent || key != "")
	var last error
	for attempt := 1; ; attempt++ {
		aopts := opts
		var slot *trailerSlot
		if retries {
			// The server's pushback travels in the trailer: asked for only
			// where it can change what happens next.
			slot = withTrailer(opts)
			aopts = slot.opts
		}
		var at int64
		resp, err, refused, retryAfter := attemptOnce(ctx, m, req, aopts, call, &at)
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
		last = err
		if !retries || ctx.Err() != nil || !retry.RetryableCodes.Has(status.Code(err)) {
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
		wait := Backoff(retry, attempt)
		if pushed {
			wait = push // the server knows better when it can take the call
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
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
		if c.events != nil && c.budgetSpent.Load() {
			c.budgetSpent.Store(false) // the budget allows retries again
		}
		if !sleep(ctx, wait) {
			return nil, err
		}
	}
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

// budgetRefused counts a retry the budget refused and reports the first
// refusal of an episode.
func (m *Method) budgetRefused(err error) {
	if m.metrics != nil {
		m.metrics.retries[retryBudget].Inc()
	}
	c := m.client
	if c.events != nil && !c.budgetSpent.Load() && c.budgetSpent.CompareAndSwap(false, true) {
		c.events.emit(Event{Kind: EventBudgetExhausted, Dependency: m.dependency(), Method: m.policy.Name,
			Cause: strings.ToLower(CodeName(status.Code(err))), Err: err})
	}
}

// attemptOnce makes one attempt through the breaker and the per-attempt
// timeout. refused is true when the breaker did not let it through, with
// how long the refusal is expected to last. When the attempt read the clock
// at its end, the reading is left in *at for the caller to reuse.
func attemptOnce[Req, Resp any](ctx context.Context, m *Method, req *Req, opts []grpc.CallOption,
	call func(context.Context, *Req, ...grpc.CallOption) (*Resp, error), at *int64) (resp *Resp, err error, refused bool, retryAfter time.Duration) {
	// Without a breaker or metrics an attempt holds nothing and counts
	// nowhere, and neither check below has anything to protect.
	counted := m.breaker != nil || m.metrics != nil
	if counted {
		if cerr := ctx.Err(); cerr != nil {
			return nil, statusFromContext(cerr), false, 0 // never sent: counts for nothing
		}
	}
	ticket, start, retryAfter, ok := m.admit()
	if !ok {
		return nil, nil, true, retryAfter
	}
	// A panic in the call (an interceptor, a codec) still gives back the
	// ticket and is counted, then goes on to the caller.
	settled := false
	if counted {
		defer m.settleUnlessDone(ctx, &settled, ticket, start)
	}
	actx := ctx
	if t := m.policy.Timeout; t > 0 {
		var cancel context.CancelFunc
		if actx, cancel = shorten(ctx, t); cancel != nil {
			defer cancel()
		}
	}
	resp, err = call(actx, req, opts...)
	settled = true
	*at = m.settle(ctx, ticket, start, err)
	return resp, err, false, 0
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
