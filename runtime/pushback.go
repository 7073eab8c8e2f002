package runtime

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// PushbackHeader is the trailer by which a gRPC server tells its client
// when to retry, in milliseconds; a negative value (or one that is not a
// whole number) means "do not retry". It is gRPC's retry design (A6);
// gRPC-Go's own retry honours it, and so does this runtime.
const PushbackHeader = "grpc-retry-pushback-ms"

// The do-not-retry mark of runtime/server, as a status detail: a
// google.rpc.ErrorInfo with this reason and domain. The runtime honours it
// as a negative pushback.
const (
	DoNotRetryReason = "RETRIED_BELOW"
	DoNotRetryDomain = "resilient.go-resilient.github.com"
)

// ShedReason is the reason of the ErrorInfo detail (in DoNotRetryDomain,
// with the refused priority under the metadata key "priority") by which
// runtime/server's Guard marks a request it shed for its priority: it
// refused that priority for the load it holds, not the work it still
// admits. The client's circuit breaker counts such a refusal as nothing
// (see verdict); the adaptive layers, the metrics and the retry loop take
// it as the overload its code says.
const ShedReason = "SHED"

// DeadlineReason is the reason of the ErrorInfo detail (in
// DoNotRetryDomain) by which runtime/server's Guard marks a request it
// refused as DEADLINE_EXCEEDED before running it, because the caller's
// deadline had passed or left less than the method's MinDeadline: the
// caller's time was short, which says nothing of the service. The
// client's circuit breaker counts such a refusal as nothing, and the
// refusal also carries the do-not-retry mark: a retry would have less
// time still.
const DeadlineReason = "DEADLINE_TOO_SHORT"

// Pushback reads what a server said about retrying a failed call: the
// do-not-retry ErrorInfo detail (wherever it is among the details, and
// over a trailer that says retry), else the grpc-retry-pushback-ms
// trailer, else a google.rpc.RetryInfo detail. d < 0 means do not retry
// (the mark, or a trailer whose value is negative or not a whole number,
// or that holds more than one value); ok is false when the server said
// nothing. A RetryInfo whose delay is negative, or whose nanos lie past a
// second or have the other sign, is malformed and says nothing (a later
// well-formed one among the details still does): it never means "retry at
// once". A positive d never wraps: a value beyond the largest Duration
// (about 292 years), a RetryInfo's past protobuf's range of 10000 years
// included, is that Duration.
// The runtime applies it to every method that retries or hedges: a
// negative pushback ends the retries, a positive one replaces the backoff
// (still within the retry budget); one longer than the call's time left
// ends the retries with the last error.
func Pushback(err error, trailer metadata.MD) (d time.Duration, ok bool) {
	d, ok, _ = pushback(err, trailer)
	return d, ok
}

// pushback is Pushback, which also reports the Guard's refusal mark it met
// on its way through the details (markAbsent where there was none), so
// that the breaker's verdict on the same attempt does not walk them again.
func pushback(err error, trailer metadata.MD) (d time.Duration, ok bool, mark refusalMark) {
	mark = markAbsent
	if v := trailer.Get(PushbackHeader); len(v) > 0 {
		d, ok = trailerPushback(v), true
	}
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() == codes.OK {
		return d, ok, mark
	}
	w := readDetails(st)
	mark = w.mark
	switch {
	case w.doNotRetry:
		// The mark wins over every other word, wherever it is among the
		// details: a service that passes on its dependency's marked error
		// appends the mark after the details the error had (a RetryInfo of
		// the dependency's included), and a trailer of its own may say
		// "retry".
		return -1, true, mark
	case ok:
		return d, ok, mark // the trailer, before a RetryInfo
	}
	return w.retryIn, w.hasRetryIn, mark
}

// trailerPushback is the pushback the values of a grpc-retry-pushback-ms
// trailer say: -1 (do not retry) for several values, a negative one or
// one that is not a whole number; else the value in milliseconds,
// saturated (see msSat).
func trailerPushback(v []string) time.Duration {
	if len(v) > 1 {
		// Several values (a proxy adding its own to the server's): as
		// gRPC's retry (A6) does, do not retry; one may say so.
		return -1
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	if errors.Is(err, strconv.ErrRange) && ms > 0 {
		err = nil // beyond int64: as long as the longest pushback
	}
	if err != nil || ms < 0 {
		return -1
	}
	return msSat(ms)
}

// details is what the details of a failed status say to the runtime.
type details struct {
	retryIn    time.Duration // the first well-formed RetryInfo's delay
	hasRetryIn bool
	doNotRetry bool        // the do-not-retry mark
	mark       refusalMark // the Guard's refusal marks, markAbsent for none (see refusalMarked)
}

// readDetails walks st's details once, whatever their number and order;
// a detail that does not decode (an unknown type) is passed over. A
// status without details costs nothing.
func readDetails(st *status.Status) (w details) {
	w.mark = markAbsent
	for _, det := range st.Details() {
		switch det := det.(type) {
		case *errdetails.ErrorInfo:
			if det.GetDomain() != DoNotRetryDomain {
				continue
			}
			switch det.GetReason() {
			case DoNotRetryReason:
				w.doNotRetry = true
			case ShedReason:
				w.mark |= markShed
			case DeadlineReason:
				w.mark |= markShortDeadline
			}
		case *errdetails.RetryInfo:
			if w.hasRetryIn {
				continue
			}
			if d, ok := retryDelay(det.GetRetryDelay()); ok {
				w.retryIn, w.hasRetryIn = d, true
			} // else malformed: no pushback, the runtime's backoff applies
		}
	}
	return w
}

// retryDelay is the wait a RetryInfo's delay asks for, ok false when it
// is malformed: none, negative, or nanos outside a second or of the other
// sign. A positive delay too long for a Duration, or even for protobuf's
// range of one (10000 years), is the longest Duration, as a trailer's
// value beyond int64 is: a longer wait asked for never waits less.
func retryDelay(rd *durationpb.Duration) (time.Duration, bool) {
	if rd == nil {
		return 0, false
	}
	if rd.CheckValid() == nil {
		d := rd.AsDuration()
		return d, d >= 0
	}
	if s, n := rd.GetSeconds(), rd.GetNanos(); s > 0 && n >= 0 && n < 1e9 {
		return math.MaxInt64, true // past protobuf's range, and positive
	}
	return 0, false
}

// refusalMark is what is known of the Guard's refusal marks of an
// attempt's error before the breaker's verdict: not yet read (0), or read
// (markAbsent) with the bit of each mark found among the details (read by
// pushback, or by refusalMarked itself). Both may be there, whatever their
// order (a server that is not a Guard may send them so): each is judged
// on its own code, neither hides the other.
type refusalMark uint8

const (
	markUnread        refusalMark = 0
	markAbsent        refusalMark = 1      // read: the bits below tell the marks found
	markShed          refusalMark = 1 << 1 // ShedReason: refused for its priority
	markShortDeadline refusalMark = 1 << 2 // DeadlineReason: the caller's time was too short
)

// refusalMarked reports whether st is a refusal that runtime/server's
// Guard marked as saying nothing of the service's health: priority
// shedding (ShedReason) on a code a Guard sheds with, UNAVAILABLE or
// RESOURCE_EXHAUSTED; or a deadline too short to start (DeadlineReason) on
// DEADLINE_EXCEEDED. A mark of another domain, or on any other code (OK
// included), is not the Guard's and is not honoured. known is what
// pushback has already read of the same error, if anything.
func refusalMarked(st *status.Status, known refusalMark) bool {
	c := st.Code()
	if c != codes.Unavailable && c != codes.ResourceExhausted && c != codes.DeadlineExceeded {
		return false // no mark to look for: the details are not read
	}
	if known == markUnread {
		known = readDetails(st).mark
	}
	if c == codes.DeadlineExceeded {
		return known&markShortDeadline != 0
	}
	return known&markShed != 0
}

// trailerSlot collects the trailer of one attempt. Slots are pooled, so
// that asking for the trailer costs a method that retries no allocation,
// and each keeps its grpc.Trailer option, made once: an attempt given no
// options of the caller's (the common case) copies no option at all, and
// writes no pointer into the slot.
type trailerSlot struct {
	md   metadata.MD
	own  []grpc.CallOption // the slot's grpc.Trailer option alone
	more []grpc.CallOption // room for the caller's options and own
}

var trailerSlots = sync.Pool{New: func() any {
	s := new(trailerSlot)
	s.own = []grpc.CallOption{grpc.Trailer(&s.md)}
	return s
}}

// withTrailer returns a slot and the attempt's options: opts and a
// grpc.Trailer option that fills slot.md. Give the slot back with put once
// the attempt is judged.
func withTrailer(opts []grpc.CallOption) (*trailerSlot, []grpc.CallOption) {
	s := trailerSlots.Get().(*trailerSlot)
	if len(opts) == 0 {
		return s, s.own
	}
	s.more = append(append(s.more[:0], opts...), s.own[0])
	return s, s.more
}

// put gives the slot back, holding neither the trailer nor the caller's
// options. A field already clear is not written again: each pointer
// written costs a write barrier while the garbage collector runs.
func (s *trailerSlot) put() {
	if len(s.more) > 0 {
		clear(s.more)
		s.more = s.more[:0]
	}
	if s.md != nil {
		s.md = nil
	}
	trailerSlots.Put(s)
}
