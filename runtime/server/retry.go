package server

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/internal/priority"
	"github.com/go-resilient/resilient/runtime/policy"
)

// PushbackHeader is the trailer by which a gRPC server tells its client
// when to retry, in milliseconds; a negative value means "do not retry"
// (gRPC's retry design, A6). The Guard sends "-1" with every answer marked
// DoNotRetry; gRPC-Go's own retry honours it.
const PushbackHeader = runtime.PushbackHeader

// The do-not-retry mark is also a status detail, google.rpc.ErrorInfo with
// this reason and domain, because a detail travels with the error value: a
// service that returns its dependency's marked error passes the mark on to
// its own callers without doing anything.
const (
	DoNotRetryReason = runtime.DoNotRetryReason
	DoNotRetryDomain = runtime.DoNotRetryDomain
)

// DoNotRetry returns err marked "do not retry": the request failed because
// a dependency of the handler failed after it had already been retried
// below, so a caller retrying the request would only multiply the calls to
// that dependency. The Guard sends the mark as the trailer
// grpc-retry-pushback-ms: -1 and as an ErrorInfo detail. err keeps its code
// and message, the code gRPC would have sent for it (a bare context error
// stays DEADLINE_EXCEEDED or CANCELLED, not UNKNOWN); nil stays nil.
func DoNotRetry(err error) error {
	if err == nil || IsDoNotRetry(err) {
		return err
	}
	st := sentStatus(err)
	if st.Code() == codes.OK {
		return err
	}
	sp := st.Proto() // a copy
	sp.Details = append(sp.Details, doNotRetryDetail)
	return status.ErrorProto(sp)
}

// markDetail is the ErrorInfo detail of a mark of the Guard's: reason in
// DoNotRetryDomain, with md (nil for none). The marks are made once, when
// the package or a shedder is set up, and each answer shares them.
func markDetail(reason string, md map[string]string) *anypb.Any {
	a, err := anypb.New(&errdetails.ErrorInfo{Reason: reason, Domain: DoNotRetryDomain, Metadata: md})
	if err != nil {
		panic(err) // a registered message always marshals
	}
	return a
}

// doNotRetryDetail is the do-not-retry mark's detail.
var doNotRetryDetail = markDetail(DoNotRetryReason, nil)

// IsDoNotRetry reports whether err carries the do-not-retry detail, as an
// error returned by DoNotRetry or received from a service that sent it.
func IsDoNotRetry(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return false
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == DoNotRetryReason && ei.GetDomain() == DoNotRetryDomain {
			return true
		}
	}
	return false
}

// transient are the codes of a dependency's failure (not of its answer)
// that the mark is about.
var transient = policy.CodesOf(codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded)

// shouldMark decides whether a handler's error is marked do-not-retry:
//   - it already carries the mark (a dependency's marked answer passed on);
//   - it is the client runtime's refusal to try again (breaker open,
//     retry budget spent), or its report that every attempt it allows
//     was made and failed transiently (runtime.ErrRetriesExhausted);
//   - its code is transient and a call the handler made to a dependency,
//     through ClientInterceptor, ended with a transient failure: the
//     runtime's retries, if any, happened there.
func shouldMark(err error, rec *downstream) bool {
	if IsDoNotRetry(err) {
		return true
	}
	if errors.Is(err, runtime.ErrCircuitOpen) || errors.Is(err, runtime.ErrBudgetExhausted) || errors.Is(err, runtime.ErrRetriesExhausted) {
		return true
	}
	return transient.Has(sentStatus(err).Code()) && rec.failed()
}

// sentStatus is the status gRPC's server answers for a handler's error
// err: the status err carries, or, for an error without one, that of a
// context's error it wraps (DEADLINE_EXCEEDED, CANCELLED) and UNKNOWN for
// any other. status.Convert would take a handler's bare ctx.Err() for
// UNKNOWN, which a FinalCodes holding UNKNOWN kept and replayed to every
// retry of the key, though the caller got CANCELLED or DEADLINE_EXCEEDED.
func sentStatus(err error) *status.Status {
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.FromContextError(err)
}

// markDoNotRetry sends the trailer and returns err with the detail.
func markDoNotRetry(ctx context.Context, err error) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackHeader, "-1"))
	return DoNotRetry(err)
}

// downstream records, for one request being served, the last outcome of
// each method the handler called through ClientInterceptor.
type downstream struct {
	guard  *Guard          // serving the request
	method *method         // the request's
	parent context.Context // the context the Guard served the request with

	mu    sync.Mutex
	last  map[string]codes.Code // method → the code its last call ended with
	acted bool                  // a call may have done work (mayHaveActed)
}

type downstreamKey struct{}

// record records a call's end in d and in the records of the other Guards
// of this server serving the same request outside d's (two Guards on one
// server, each with a policy for the method): the outer one keeps the
// request's outcome, and what it keeps depends on the calls (passedOn).
// Walked only when the handler calls a dependency.
func (d *downstream) record(method string, err error) {
	c := status.Code(err)
	acted := mayHaveActed(err)
	for ; d != nil; d = d.outerRecord() {
		d.mu.Lock()
		if d.last == nil {
			d.last = map[string]codes.Code{}
		}
		d.last[method] = c
		d.acted = d.acted || acted
		d.mu.Unlock()
	}
}

// outerRecord is the record of the Guard serving the same request outside
// d's, nil for none (or another method's request, whose context this
// one's was made with: an in-process call).
func (d *downstream) outerRecord() *downstream {
	o, _ := d.parent.Value(downstreamKey{}).(*downstream)
	if o == nil || o.method.name != d.method.name {
		return nil
	}
	return o
}

// recordOf is the record of the calls of the request ctx serves, nil
// outside a Guard's.
func recordOf(ctx context.Context) *downstream {
	d, _ := ctx.Value(downstreamKey{}).(*downstream)
	return d
}

// failed reports whether a dependency's last call ended with a transient
// failure; false for a nil d.
func (d *downstream) failed() bool {
	return d.any(transient.Has)
}

// passedOn reports whether a dependency's last call ended with code: the
// handler's failure with that code is likely the dependency's passed on.
func (d *downstream) passedOn(code codes.Code) bool {
	return d.any(func(c codes.Code) bool { return c == code })
}

// anyActed reports whether a call through ClientInterceptor may have done
// work (any call, not only each method's last: mayHaveActed); false for a
// nil d.
func (d *downstream) anyActed() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acted
}

// mayHaveActed reports whether a call that ended with err may have done
// its work at the dependency: one that answered OK, and one that failed
// in any way but a Guard's refusal at the dependency's door (its shed or
// deadline mark, the handler there not run). A call cut by the request's
// deadline or cancellation, or whose connection broke, may have charged
// before its answer was lost. An OK costs no decoding.
func mayHaveActed(err error) bool {
	if err == nil {
		return true
	}
	st, ok := status.FromError(err)
	return !ok || !holdsRefusalMark(st.Details())
}

func (d *downstream) any(f func(codes.Code) bool) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.last {
		if f(c) {
			return true
		}
	}
	return false
}

// ClientInterceptor is for the connections a service uses to call its own
// dependencies (grpc.WithChainUnaryInterceptor). Called with the context of
// a request the Guard is serving, it sends the request's granted priority
// on (unless the call already sends one as low or lower, set with
// runtime.WithPriority) and tells the Guard how each call ended, so that the
// handler's failure is marked do-not-retry when a dependency failed after
// the runtime's retries. Elsewhere it does nothing. Put it beneath the resilient client: it sees every attempt, and
// the last one decides.
func ClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = forwardPriority(ctx)
		err := invoker(ctx, method, req, reply, cc, opts...)
		if d, ok := ctx.Value(downstreamKey{}).(*downstream); ok {
			d.record(method, err)
		}
		return err
	}
}

// StreamClientInterceptor is ClientInterceptor for streams: it sends the
// request's priority on.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(forwardPriority(ctx), desc, cc, method, opts...)
	}
}

func forwardPriority(ctx context.Context) context.Context {
	p, ok := PriorityFrom(ctx)
	if !ok {
		return ctx
	}
	// A generated client above sends its method's annotated priority; the
	// request's own, when lower, must still travel on.
	if sent, ok := priority.Outgoing(ctx); ok && Priority(sent) <= p {
		return ctx
	}
	return runtime.WithPriority(ctx, p)
}
