package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// shedder counts the requests of one service in flight and admits or
// refuses each against the cumulative limit of its priority. Admitting is
// one compare-and-swap; no lock is shared by the requests.
type shedder struct {
	service  string
	limits   [PriorityCritical + 1]int64
	pushback time.Duration
	code     codes.Code
	details  [PriorityCritical + 1][]*anypb.Any // of each priority's refusal, made once

	inFlight atomic.Int64
	admitted [PriorityCritical + 1]atomic.Uint64
	shed     [PriorityCritical + 1]atomic.Uint64
}

func newShedder(service string, p *policy.Shedding) *shedder {
	s := &shedder{service: service, pushback: p.Pushback, code: p.Code}
	for q := PriorityLow; q <= PriorityCritical; q++ {
		s.limits[q] = int64(p.Limits.For(q))
	}
	if s.pushback == 0 {
		s.pushback = policy.DefaultShedPushback
	}
	if s.code == codes.OK {
		s.code = codes.Unavailable
	}
	retryIn, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(s.pushback)})
	if err != nil {
		panic(err) // a registered message always marshals
	}
	for q := PriorityLow; q <= PriorityCritical; q++ {
		s.details[q] = []*anypb.Any{retryIn, markDetail(runtime.ShedReason, map[string]string{"priority": q.String()})}
	}
	return s
}

// admit takes a place for a request of m of priority p, or returns the
// refusal.
func (s *shedder) admit(p Priority, m *method) (*admission, error) {
	limit := s.limits[p]
	for {
		n := s.inFlight.Load()
		if n >= limit {
			s.shed[p].Add(1)
			return nil, s.refusal(p, n, limit)
		}
		if s.inFlight.CompareAndSwap(n, n+1) {
			s.admitted[p].Add(1)
			return &admission{s: s, m: m}, nil
		}
	}
}

// refusal is the answer to a shed request. The InTapHandle that sends it
// can only answer a status (gRPC writes no other trailer there), so the
// pushback travels as a google.rpc.RetryInfo detail, which Pushback reads.
// Beside it, an ErrorInfo (runtime.ShedReason in runtime.DoNotRetryDomain,
// the priority under "priority") marks the refusal as priority shedding:
// the client's breaker then counts it as nothing, since the service still
// serves what it admits. The details are made once per priority; the
// status copies them.
func (s *shedder) refusal(p Priority, n, limit int64) error {
	return status.ErrorProto(&spb.Status{
		Code: int32(s.code),
		Message: fmt.Sprintf("resilient: %s is shedding %s-priority requests: %d in flight, limit %d; retry in %s",
			s.service, p, n, limit, s.pushback),
		Details: s.details[p],
	})
}

// admission is the place of one admitted request, given back once: when
// the handler returns (the interceptor's serving.end, panics included), or,
// for a request that never reaches the handler (a message that does not
// decode, a method the server does not register, a stream reset or a
// deadline before the interceptor), when gRPC cancels the stream's
// context, which it does at every ending of a stream. The context is also
// cancelled when the caller's deadline passes or it cancels while the
// handler still runs: the state tells the two apart, so that a handler
// outliving its caller keeps its place until it returns.
type admission struct {
	s     *shedder
	m     *method       // whose request holds the place
	state atomic.Uint32 // admitted → serving → released, or admitted → released
	stop  func() bool
}

const (
	admitted uint32 = iota
	servingNow
	released
)

// serve hands the place to the interceptor, which gives it back when the
// handler returns. It reports false when the stream has already ended.
func (a *admission) serve() bool { return a.state.CompareAndSwap(admitted, servingNow) }

// unserved gives the place back if no interceptor took it.
func (a *admission) unserved() {
	if a.state.CompareAndSwap(admitted, released) {
		a.s.inFlight.Add(-1)
	}
}

// done gives the place back and forgets the context's callback.
func (a *admission) done() {
	if a.state.Swap(released) != released {
		a.s.inFlight.Add(-1)
	}
	if a.stop != nil {
		a.stop()
	}
}

type admissionKey struct{}

// hold ties a to the stream's context: gRPC cancels it whenever the stream
// ends, however it ends, which a stats.Handler's End does not cover (gRPC
// sends no End for an unknown method).
func hold(ctx context.Context, a *admission) context.Context {
	a.stop = context.AfterFunc(ctx, a.unserved)
	return context.WithValue(ctx, admissionKey{}, a)
}

// admissionFrom returns the place of ctx's request of m: nil when it holds
// none, or when the place in ctx is another request's, whose context this
// request was made with.
func admissionFrom(ctx context.Context, m *method) *admission {
	a, _ := ctx.Value(admissionKey{}).(*admission)
	if a == nil || a.m != m {
		return nil
	}
	return a
}

// notRefusedHere returns a handler's error without the Guard's refusal
// marks (runtime.ShedReason, runtime.DeadlineReason) that a dependency's
// refusal carries when the handler passes it on: a mark says that the
// server which sent it refused the request at its door for a reason that
// tells nothing of its health, and this server did not refuse it. Its
// callers' breakers then judge the failure by its code, as any other
// failure of this service's (the RetryInfo and the do-not-retry mark are
// left as they are). An error without a mark is returned as it is, and an
// error without details costs no decoding. The error returned still wraps
// err, so that errors.Is finds what err matched (runtime.ErrRetriesExhausted,
// ErrCircuitOpen, ErrBudgetExhausted, which the do-not-retry decision
// reads after this).
func notRefusedHere(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	sp := st.Proto()
	if len(sp.GetDetails()) == 0 {
		return err
	}
	kept := sp.Details[:0:0]
	for _, a := range sp.Details {
		var ei errdetails.ErrorInfo
		if a.MessageIs(&ei) && a.UnmarshalTo(&ei) == nil && ei.GetDomain() == runtime.DoNotRetryDomain &&
			(ei.GetReason() == runtime.ShedReason || ei.GetReason() == runtime.DeadlineReason) {
			continue
		}
		kept = append(kept, a)
	}
	if len(kept) == len(sp.Details) {
		return err
	}
	sp.Details = kept
	return &passedOn{err: err, st: status.FromProto(sp)}
}

// passedOn is a handler's error that passed on a dependency's marked
// refusal: gRPC sends st (the refusal's status without the marks), and
// errors.Is and errors.As still see err.
type passedOn struct {
	err error
	st  *status.Status
}

func (u *passedOn) Error() string              { return u.err.Error() }
func (u *passedOn) Unwrap() error              { return u.err }
func (u *passedOn) GRPCStatus() *status.Status { return u.st }
