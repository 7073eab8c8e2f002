package server

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/internal/priority"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Priority is how important a request is when the server must shed load.
// Four levels; the zero value means "not said" and counts as normal. It is
// the client runtime's type, so that the generated clients send exactly
// what the Guard reads; a caller lowers the priority of what it sends with
// runtime.WithPriority.
type Priority = policy.Priority

// The priorities, lowest first.
const (
	PriorityUnspecified = policy.PriorityUnspecified
	PriorityLow         = policy.PriorityLow
	PriorityNormal      = policy.PriorityNormal
	PriorityHigh        = policy.PriorityHigh
	PriorityCritical    = policy.PriorityCritical
)

// PriorityHeader is the metadata key that carries a request's priority
// ("low", "normal", "high" or "critical"). The server takes the lowest of
// the values sent and of the method's annotated priority: a caller may
// lower a request's priority, never raise it. A value it does not know is
// ignored.
const PriorityHeader = runtime.PriorityHeader

// effectivePriority is the lowest of the annotated priority and every
// known value of PriorityHeader in md.
func effectivePriority(md metadata.MD, annotated Priority) Priority {
	return Priority(priority.Lowest(md[PriorityHeader], uint8(annotated)))
}

type grantKey struct{}

// grant is what one Guard's door gave one request of one of its methods:
// m (a method belongs to one Guard), the priority p, and a, the place in
// flight (nil where the service does not shed). Outer is the grant
// another Guard gave the same request before this one (a request of the
// same method: two Guards on one server, each with a policy for it), so
// that each Guard finds its own; a grant of another method's request,
// whose context this one was made with (an in-process call), is never
// an outer. A grant with neither a nor outer is one of m's grants, made
// once, and one with a is a's own, so that granting allocates nothing
// more than a place in flight.
type grant struct {
	m     *method
	p     Priority
	a     *admission
	outer *grant
}

// grantOf is the one reader of the grants in ctx. With m, it returns the
// grant m's door gave ctx's request, among those of every Guard the
// request passed; with m nil, the last grant given, whichever Guard's.
// It returns nil where ctx holds none, or where a Guard's interceptor hid
// those of another method's request (forRequestOf).
func grantOf(ctx context.Context, m *method) *grant {
	gr, _ := ctx.Value(grantKey{}).(*grant)
	if m == nil {
		return gr
	}
	for ; gr != nil; gr = gr.outer {
		if gr.m == m {
			return gr
		}
	}
	return nil
}

// withGrant returns ctx holding m's grant of priority p and place a to
// its request, above the grants other Guards gave the same request.
func withGrant(ctx context.Context, m *method, p Priority, a *admission) context.Context {
	outer := grantOf(ctx, nil)
	if outer != nil && outer.m.name != m.name {
		outer = nil // another request's, whose context this one was made with
	}
	var gr *grant
	switch {
	case a != nil:
		// Allocated with the place: a shed request's grant costs nothing more.
		a.gr = grant{m: m, p: p, a: a, outer: outer}
		gr = &a.gr
	case outer != nil:
		gr = &grant{m: m, p: p, outer: outer}
	default:
		gr = &m.grants[p]
	}
	return context.WithValue(ctx, grantKey{}, gr)
}

// forRequestOf returns ctx without the grants of another method's request
// (one whose context a request of fullMethod was made with, through an
// in-process channel that passes values on), for a request of a method
// this Guard does not hold: the grants of that request are not this
// one's, and PriorityFrom in its handler reports none.
func forRequestOf(ctx context.Context, fullMethod string) context.Context {
	if gr := grantOf(ctx, nil); gr != nil && gr.m.name != fullMethod {
		return context.WithValue(ctx, grantKey{}, (*grant)(nil))
	}
	return ctx
}

// PriorityFrom returns the priority a Guard granted the request being
// served with ctx, and false outside a request of a method in a policy
// (a request to another method made with the context of one being served,
// in-process, is not that request: it reports the priority the Guard
// granted it, or false). With two Guards on one server, each with a
// policy for the method, it is the priority of the Guard whose
// interceptor runs innermost. ClientInterceptor forwards it to the
// services the handler calls.
func PriorityFrom(ctx context.Context) (Priority, bool) {
	gr := grantOf(ctx, nil)
	if gr == nil {
		return PriorityUnspecified, false
	}
	return gr.p, true
}
