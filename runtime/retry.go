package runtime

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
)

// retried is the retry loop of a unary call that does not hedge: one
// attempt through the breaker and its own timeout (attemptInto), then,
// while the method may be retried (it retries, and is idempotent or the
// call is keyed) and the failure is retryable, a wait (backoff with full
// jitter, or the server's pushback) and another attempt, within the
// method's MaxAttempts, the retry budget and the call's deadline. An open
// breaker ends the loop at once: it is a final answer. The other layers
// (rate limit, bulkhead, overall limit, idempotency key) are unary's, and
// wrap it. wait is nil for a call; for a cache's shared call, see unary.
func retried[Req, Resp any](ctx context.Context, m *methodState, keyed bool, wait context.Context, in *invocation[Req, Resp]) (*Resp, error) {
	p := m.policy
	mx := m.metrics
	shared := wait != nil
	if !shared {
		wait = ctx
	}
	c := m.client
	retry := p.Retry
	retries := m.hot.retries && (p.Idempotent || keyed)
	if retries && c.events != nil {
		m.budgetRecovered()
	}
	var last error
	// charged: the budget counted the retry about to be made, at chargedAt;
	// a retry that is then not sent (refused by the breaker or an adaptive
	// layer, or its call over first) is given back.
	charged, chargedAt := false, int64(0)
	for attempt := 1; ; attempt++ {
		if shared && wait.Err() != nil {
			// A shared call whose callers all left: no attempt for nobody.
			if charged {
				m.budget.giveBack(chargedAt)
			}
			return nil, firstOf(last, wait)
		}
		// The server's pushback travels in the trailer: asked for only
		// where it can change what happens next.
		var end attemptEnd
		resp, err := attemptInto(ctx, m, in, retries, &end)
		if !end.sent {
			if charged {
				m.budget.giveBack(chargedAt)
			}
			if attempt > 1 && !end.refused {
				// The call's context ended between the pause and the
				// retry (attemptInto looks before it sends): nothing was
				// sent, no retry made, and the caller gets what a call
				// whose context ends in the pause gets.
				return nil, ended(ctx, last)
			}
		}
		charged = false
		if retries && attempt == 1 && end.sent {
			// The request is counted with the clock reading the attempt
			// already made: one read of the clock per attempt, not two.
			at := end.at
			if at == 0 {
				at = c.now()
			}
			m.budget.request(at)
		}
		if end.refused && err != nil {
			// Refused by an adaptive layer: final and local, like an open
			// breaker, with the last real error as its cause; a retry so
			// refused is counted as one not made.
			if attempt > 1 {
				m.adaptiveRefused(err)
			}
			return nil, withCause(err, last)
		}
		if end.refused {
			m.breakerRefused(attempt > 1)
			// An open breaker is a final answer, not something to retry.
			return nil, circuitOpenError(m.dependency(), p.Name, end.retryAfter, last)
		}
		if mx != nil && attempt > 1 {
			mx.retries[retryMade].Inc()
		}
		if err == nil {
			return resp, nil
		}
		if end.timedOut {
			err = attemptTimeoutError(m.dependency(), p.Name, attempt, p.Timeout, err)
		}
		last = err
		if ctx.Err() != nil {
			return nil, ended(ctx, err)
		}
		if !retries || end.local || !retryable(retry.RetryableCodes, err, end.timedOut) {
			return nil, err
		}
		if attempt >= retry.MaxAttempts {
			// Every attempt the policy allows was made, whatever the last
			// one's pushback says: a do-not-retry that stops no retry does
			// not hide that the retries ran out
			// (TestAttack29BLastAttemptsDoNotRetryStillExhaustsTheRetries).
			return nil, retriesExhaustedError(m.dependency(), p.Name, attempt, "attempts", err)
		}
		if end.pushed && end.push < 0 {
			if mx != nil {
				mx.retries[retryPushback].Inc()
			}
			return nil, err // the server said not to retry
		}
		pause := backoffFor(retry, attempt)
		if end.pushed {
			pause = end.push // the server knows better when it can take the call
		}
		if !endsInTime(ctx, pause) {
			if mx != nil {
				mx.retries[retryDeadline].Inc()
			}
			return nil, err // the retry could not start before the deadline
		}
		at := c.now()
		if !m.budget.tryRetry(at) {
			err = budgetExhaustedError(m.dependency(), p.Name, err)
			m.budgetRefused(err)
			return nil, err
		}
		charged, chargedAt = true, at
		if !sleep(wait, pause) || !endsInTime(ctx, 0) {
			// The context ended in the pause, or its deadline passed as
			// the pause ended, before its timer ran: gRPC would refuse
			// to send the retry (TestAttack26ARetryPastItsDeadlineIsNotSent).
			m.budget.giveBack(at)
			return nil, ended(ctx, err)
		}
	}
}

// endsInTime reports whether a wait of d (a backoff, or the server's
// pushback) ends before ctx's deadline, so that the retry or the hedged
// copy after it can start; always, for a context without a deadline.
func endsInTime(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
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
func retryable(listed policy.CodeSet, err error, timedOut bool) bool {
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
