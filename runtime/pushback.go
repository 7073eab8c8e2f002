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

// pushback is Pushback, which also reports the shed mark it met on its way
// through the details (shedPresent, or shedAbsent where there was none), so
// that the breaker's verdict on the same attempt does not walk them again.
func pushback(err error, trailer metadata.MD) (d time.Duration, ok bool, shed shedMark) {
	shed = shedAbsent
	if v := trailer.Get(PushbackHeader); len(v) > 0 {
		if len(v) > 1 {
			// Several values (a proxy adding its own to the server's): as
			// gRPC's retry (A6) does, do not retry; one may say so.
			d, ok = -1, true
		} else {
			ms, perr := strconv.ParseInt(v[0], 10, 64)
			if errors.Is(perr, strconv.ErrRange) && ms > 0 {
				perr = nil // beyond int64: as long as the longest pushback
			}
			if perr != nil || ms < 0 {
				d, ok = -1, true
			} else {
				d, ok = msSat(ms), true
			}
		}
	}
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() == codes.OK {
		return d, ok, shed
	}
	w := readDetails(st)
	if w.shed {
		shed = shedPresent
	}
	switch {
	case w.doNotRetry:
		// The mark wins over every other word, wherever it is among the
		// details: a service that passes on its dependency's marked error
		// appends the mark after the details the error had (a RetryInfo of
		// the dependency's included), and a trailer of its own may say
		// "retry".
		return -1, true, shed
	case ok:
		return d, ok, shed // the trailer, before a RetryInfo
	}
	return w.retryIn, w.hasRetryIn, shed
}

// details is what the details of a failed status say to the runtime.
type details struct {
	retryIn    time.Duration // the first well-formed RetryInfo's delay
	hasRetryIn bool
	doNotRetry bool // the do-not-retry mark
	shed       bool // the priority-shedding mark (see shedMarked)
}

// readDetails walks st's details once, whatever their number and order;
// a detail that does not decode (an unknown type) is passed over. A
// status without details costs nothing.
func readDetails(st *status.Status) (w details) {
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
				w.shed = true
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

// shedMark is what is known of the priority-shedding mark of an attempt's
// error before the breaker's verdict: not yet read, or read by pushback.
type shedMark uint8

const (
	shedUnread shedMark = iota
	shedAbsent
	shedPresent
)

// shedMarked reports whether st is a refusal that runtime/server's Guard
// marked as priority shedding: a code a Guard sheds with (UNAVAILABLE or
// RESOURCE_EXHAUSTED) and the ShedReason ErrorInfo in DoNotRetryDomain. A
// mark of another domain, or on any other code (OK included), is not the
// Guard's and is not honoured. known is what pushback has already read of
// the same error, if anything.
func shedMarked(st *status.Status, known shedMark) bool {
	if c := st.Code(); c != codes.Unavailable && c != codes.ResourceExhausted {
		return false
	}
	switch known {
	case shedPresent:
		return true
	case shedAbsent:
		return false
	}
	return readDetails(st).shed
}

// trailerSlot collects the trailer of one attempt. Slots are pooled, so
// that asking for the trailer costs a method that retries no allocation,
// and each keeps its grpc.Trailer option, made once: an attempt given no
// options of the caller's (the common case) copies no option at all.
type trailerSlot struct {
	md   metadata.MD
	opts []grpc.CallOption // the attempt's options: own, after the caller's if any
	own  [1]grpc.CallOption
	more []grpc.CallOption // room for the caller's options and own
}

var trailerSlots = sync.Pool{New: func() any {
	s := new(trailerSlot)
	s.own[0] = grpc.Trailer(&s.md)
	return s
}}

// withTrailer returns a slot whose opts are opts and a grpc.Trailer option
// that fills slot.md. Give it back with put once the attempt is judged.
func withTrailer(opts []grpc.CallOption) *trailerSlot {
	s := trailerSlots.Get().(*trailerSlot)
	if len(opts) == 0 {
		s.opts = s.own[:]
	} else {
		s.more = append(append(s.more[:0], opts...), s.own[0])
		s.opts = s.more
	}
	return s
}

// put gives the slot back, holding neither the trailer nor the caller's
// options.
func (s *trailerSlot) put() {
	if len(s.more) > 0 {
		clear(s.more)
		s.more = s.more[:0]
	}
	s.opts = nil
	s.md = nil
	trailerSlots.Put(s)
}
