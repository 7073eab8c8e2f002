package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
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

// admit takes a place for a request of method of priority p, or returns
// the refusal.
func (s *shedder) admit(method string, p Priority) (*admission, error) {
	limit := s.limits[p]
	for {
		n := s.inFlight.Load()
		if n >= limit {
			s.shed[p].Add(1)
			return nil, s.refusal(method, p, n, limit)
		}
		if s.inFlight.CompareAndSwap(n, n+1) {
			s.admitted[p].Add(1)
			return &admission{s: s}, nil
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
// status copies them. It is a refusal of method's request (refuse).
func (s *shedder) refusal(method string, p Priority, n, limit int64) error {
	return refuse(method, &spb.Status{
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
	state atomic.Uint32 // admitted → serving → released, or admitted → released
	stop  func() bool
	gr    grant // the request's grant, made with the place (withGrant)
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

// hold ties a to the stream's context: gRPC cancels it whenever the stream
// ends, however it ends, which a stats.Handler's End does not cover (gRPC
// sends no End for an unknown method). The request's grant carries a.
func hold(ctx context.Context, a *admission) {
	a.stop = context.AfterFunc(ctx, a.unserved)
}
