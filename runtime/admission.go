package runtime

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
)

// admit asks the method's breaker, if any, to let a unary attempt through.
// It reads no clock while the breaker is closed: the attempt's start, where
// it is needed, comes with its context (see attemptOnce). ok is false when
// the breaker refused, with how long the refusal is expected to last. The
// caller has checked that its context is not over: what is admitted is
// sent.
func (m *methodState) admit() (t ticket, retryAfter time.Duration, ok bool) {
	br := m.breaker
	if br == nil {
		return ticket{}, 0, true
	}
	if t, ok := br.closedTicket(); ok {
		return t, 0, true
	}
	return br.allow(m.client.now, true)
}

// admitAs is admit for a stream, which may take a half-open probe only
// where no unary method shares the breaker (probe false otherwise, see
// stream.go). A stream has no attempt context to read its start from: it
// reads the clock at the start when the duration is used, by the metrics;
// start is 0 otherwise.
func (m *methodState) admitAs(probe bool) (t ticket, start int64, retryAfter time.Duration, ok bool) {
	br := m.breaker
	if br != nil {
		if t, retryAfter, ok = br.allow(m.client.now, probe); !ok {
			return t, 0, retryAfter, false
		}
	}
	if m.hot.measures {
		start = m.client.now()
	}
	return t, start, 0, true
}

// measuresDuration reports whether an attempt's or a stream's duration is
// used: by the metrics, or by the breaker's slow-call threshold.
func (m *methodState) measuresDuration() bool {
	return m.metrics != nil || m.breaker != nil && m.breaker.p.SlowCallThreshold > 0
}

// settledEarly is the common end of a unary attempt, a success on a
// closed breaker without metrics or slow-call threshold (countsEarly): it
// counts the success at the start of the attempt a, and reports whether it
// did; when it did not, settle must. actx is the attempt's context.
//
// The clock is not read: the breaker only needs to know which bucket of its
// window to count the success in, and an attempt whose timeout is no
// longer than a bucket (Window/10), and which ended before its deadline,
// ended at most one bucket after its start.
func (m *methodState) settledEarly(actx context.Context, a *attemptState) bool {
	return m.hot.countsEarly && a.sp.bounded && actx.Err() == nil &&
		m.breaker.doneEarly(a.tk, a.sp.start, m.client.now)
}

// settle tells the breaker, if any, the outcome of a unary attempt that
// admit let through with a.tk and that began at a.sp, and counts it in the
// metrics, both as verdict says, where settledEarly did not count a
// success. An answer (NOT_FOUND, …) is a success too, and settledEarly
// counts it where it can. ctx is the call's context, outside the
// attempt's own timeout; actx the attempt's. It returns a clock reading
// for the caller to reuse (the end, or the start where that was enough), 0
// when neither needed the clock.
func (m *methodState) settle(ctx, actx context.Context, a *attemptState, err error) int64 {
	if !m.hot.counted {
		return 0
	}
	o, code := outcomeSuccess, codes.OK
	if err != nil {
		o, code = m.verdict(ctx, err, a.mark)
		if o == outcomeSuccess && m.settledEarly(actx, a) {
			return a.sp.start
		}
	}
	return m.record(a.tk, o, code, a.sp.start, true)
}

// settleAs tells the breaker, if any, the outcome of what was admitted
// with t at start, read at its exact end, and counts it in the metrics. It
// serves a unary attempt (timed true) or a stream, whose duration the
// breaker's slow-call threshold does not judge: a stream's first message
// comes when there is something to say (a watch may wait minutes), so its
// lateness says nothing about the dependency. It returns the clock reading
// at the end, 0 when neither needed the clock.
func (m *methodState) settleAs(ctx context.Context, t ticket, start int64, err error, timed bool) int64 {
	if m.breaker == nil && m.metrics == nil {
		return 0
	}
	o, code := m.verdict(ctx, err, markUnread)
	return m.record(t, o, code, start, timed)
}

// record is the end of settleAs, with the verdict given.
func (m *methodState) record(t ticket, o outcome, code codes.Code, start int64, timed bool) int64 {
	br, mx := m.breaker, m.metrics
	n := m.client.now()
	if br != nil {
		var latency time.Duration
		if timed {
			latency = time.Duration(n - start)
		}
		br.done(t, o, latency, n)
	}
	if mx != nil {
		mx.attempt(code, n-start)
	}
	return n
}

// panicHeld reports whether an attempt admitted with t must be settled
// if its call panics: a probe's or a bystander's ticket holds a place in
// the half-open breaker, and the metrics count every attempt. A panic is
// a client fault, an ignored outcome, which a closed breaker's ticket
// records nowhere: for it, without metrics, settling would change nothing.
func (m *methodState) panicHeld(t ticket) bool {
	return m.metrics != nil || t.probe || t.bystander
}

// settleUnlessDone, deferred, settles an attempt whose call did not return
// (it panicked) as errPanicked; the panic goes on, unrecovered. a is read
// when the panic comes: a panic before the attempt knew its start counts a
// duration of 0. No context is needed: verdict ignores a client fault
// whatever the caller's context says.
func (m *methodState) settleUnlessDone(a *attemptState) {
	if !a.settled {
		start := a.sp.start
		if !a.sp.known {
			start = m.client.now()
		}
		m.settleAs(context.Background(), a.tk, start, errPanicked, true)
	}
}

// verdict is what the end of an attempt or a stream says about the
// dependency, for the breaker (the outcome) and the metrics (the code)
// alike. ctx is the call's context, outside the attempt's own timeout;
// mark is what pushback has already read of err's refusal mark, if anything.
//
//   - nil: a success, code OK;
//   - the caller cancelled: ignored (nothing is known of the dependency),
//     counted under CANCELLED;
//   - a fault on the client's side (a panic in the call, a request that
//     could not be sent): ignored, counted under its code;
//   - a code in the breaker's FailureCodes on a refusal that
//     runtime/server's Guard marked as saying nothing of the service's
//     health (refusalMarked): ignored, counted under its code. Priority
//     shedding: the server refused the priority for its load and still
//     serves the work it admits; counted as a failure in a breaker the
//     client's methods share, low-priority work shed in numbers would have
//     the breaker refuse the high-priority work too. A deadline too short
//     to start: the caller's time was short, and one caller's tight
//     deadlines would cut off the others'. Only a failure pays for the
//     look at the details;
//   - any other code in FailureCodes: a failure; any other code, an
//     answer: a success.
//
// A context error that is not a status (a stream's own timeout) is
// counted under the code gRPC gives it: DEADLINE_EXCEEDED or CANCELLED.
func (m *methodState) verdict(ctx context.Context, err error, mark refusalMark) (outcome, codes.Code) {
	if err == nil {
		return outcomeSuccess, codes.OK
	}
	var failures policy.CodeSet // the breaker's failure codes; none without one
	if br := m.breaker; br != nil {
		failures = br.p.FailureCodes
	}
	st, code := statusOf(err)
	_, local := err.(*clientFault) // made by the runtime itself, never wrapped
	switch {
	case local, errors.Is(ctx.Err(), context.Canceled):
		return outcomeIgnored, code
	case failures.Has(code):
		if st != nil && refusalMarked(st, mark) {
			return outcomeIgnored, code
		}
		return outcomeFailure, code
	}
	return outcomeSuccess, code
}

// codeOf is the gRPC code of err: its status code, or for a bare context
// error the code gRPC gives it.
func codeOf(err error) codes.Code {
	_, code := statusOf(err)
	return code
}

// statusOf is err's status, nil for an error that is not one, and its
// gRPC code (for a bare context error, the code gRPC gives it).
func statusOf(err error) (*status.Status, codes.Code) {
	if st, ok := status.FromError(err); ok {
		return st, st.Code()
	}
	return nil, status.FromContextError(err).Code()
}

// clientFault is the end of an attempt or a stream caused on the client's
// side, before or without the dependency's answer: a panic in the call (an
// interceptor, a codec), a message that could not be sent (it does not
// marshal). It says nothing about the dependency.
type clientFault struct{ err error }

func (f *clientFault) Error() string { return f.err.Error() }
func (f *clientFault) Unwrap() error { return f.err }

// errPanicked is what settle is told of an attempt whose call panicked;
// the panic itself goes on to the caller.
var errPanicked error = &clientFault{err: status.Error(codes.Unknown, "resilient: the call panicked")}

// adaptiveRefused counts a repeat (a retry, or a hedged copy after the
// first) that an adaptive layer refused with err, under the layer that
// refused it: the throttler, or the concurrency limit. Each refusal of an
// attempt is counted already (throttled_total, adaptive_rejections_total);
// a repeat refused so was decided and not made, as one the open breaker
// refuses.
func (m *methodState) adaptiveRefused(err error) {
	if mx := m.metrics; mx != nil {
		o := retryAdaptiveLimit
		if errors.Is(err, ErrThrottled) {
			o = retryThrottler
		}
		mx.retries[o].Inc()
	}
}

// breakerRefused counts an attempt the breaker refused; retry says it was
// not the call's first (a retry, or a hedged copy after the first).
func (m *methodState) breakerRefused(retry bool) {
	if mx := m.metrics; mx != nil {
		mx.breakerRejections.Inc()
		if retry {
			mx.retries[retryBreaker].Inc()
		}
	}
}
