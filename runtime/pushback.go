package runtime

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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

// Pushback reads what a server said about retrying a failed call: the
// do-not-retry ErrorInfo detail (wherever it is among the details, and
// over a trailer that says retry), else the grpc-retry-pushback-ms
// trailer, else a google.rpc.RetryInfo detail. d < 0 means do not retry
// (the mark, or a trailer whose value is negative or not a whole number,
// or that holds more than one value); ok is false when the server said
// nothing. A positive d never wraps: a value beyond the largest Duration
// (about 292 years) is that Duration. The runtime applies it to every
// method that retries or hedges: a negative pushback ends the retries, a
// positive one replaces the backoff (still within the retry budget); one
// longer than the call's time left ends the retries with the last error.
func Pushback(err error, trailer metadata.MD) (d time.Duration, ok bool) {
	if v := trailer.Get(PushbackHeader); len(v) > 0 {
		if len(v) > 1 {
			// Several values (a proxy adding its own to the server's): as
			// gRPC's retry (A6) does, do not retry; one may say so.
			return -1, true
		}
		ms, perr := strconv.ParseInt(v[0], 10, 64)
		if errors.Is(perr, strconv.ErrRange) && ms > 0 {
			perr = nil // beyond int64: as long as the longest pushback
		}
		if perr != nil || ms < 0 {
			return -1, true
		}
		d, ok = msSat(ms), true
	}
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() == codes.OK || len(st.Proto().GetDetails()) == 0 {
		return d, ok
	}
	// The mark wins over every other word, wherever it is among the
	// details: a service that passes on its dependency's marked error
	// appends the mark after the details the error had (a RetryInfo of the
	// dependency's included), and a trailer of its own may say "retry".
	retryIn, hasRetryIn := time.Duration(0), false
	for _, det := range st.Details() {
		switch det := det.(type) {
		case *errdetails.ErrorInfo:
			if det.GetReason() == DoNotRetryReason && det.GetDomain() == DoNotRetryDomain {
				return -1, true
			}
		case *errdetails.RetryInfo:
			if !hasRetryIn && det.GetRetryDelay() != nil {
				retryIn, hasRetryIn = max(det.GetRetryDelay().AsDuration(), 0), true
			}
		}
	}
	if ok {
		return d, ok // the trailer, before a RetryInfo
	}
	return retryIn, hasRetryIn
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
