package server

import (
	"context"
	"reflect"
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime"
)

// statusDetailsKey is the metadata key under which gRPC sends a status's
// details (a google.rpc.Status, serialized). A handler that copies its
// dependency's trailer into its own (a gateway) forwards it, and gRPC
// sends the handler's copy whenever the handler's own status has no
// details: its caller then decodes the dependency's status as this
// server's.
const statusDetailsKey = "grpc-status-details-bin"

// served is the context the Guard gives the handler of a request of one of
// its methods: the parent's values, the request's record of its
// dependencies' outcomes (under downstreamKey), and gRPC's stream in the
// parent (grpc.ServerTransportStreamFromContext) seen through markless, so
// that a grpc-status-details-bin the handler sets (grpc.SetHeader,
// grpc.SendHeader, grpc.SetTrailer) loses the Guard's refusal marks, as
// the handler's error does (notRefusedHere). One allocation holds the
// three, where the record and its context value took two.
type served struct {
	context.Context
	rec downstream
	out markless // out.ServerTransportStream is nil where nothing is wrapped
}

// newServed returns the context of a request of m served by g, made from
// ctx.
func newServed(ctx context.Context, g *Guard, m *method) *served {
	c := &served{Context: ctx, rec: downstream{guard: g, method: m, parent: ctx}}
	// A stream whose values cannot be compared without a panic (a slice,
	// or a value holding an interface, which may hold one; no gRPC stream
	// is one) is left as it is: Value could not tell it from another value.
	if s := grpc.ServerTransportStreamFromContext(ctx); s != nil && comparesSafely(reflect.TypeOf(s)) {
		c.out.ServerTransportStream = s
	}
	return c
}

// comparesSafely reports whether values of t can be compared with == and
// never panic: t is comparable and holds no interface (whose dynamic value
// may not be). A pointer, gRPC's stream, is answered at once.
func comparesSafely(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Chan, reflect.UnsafePointer:
		return true
	case reflect.Interface, reflect.Slice, reflect.Map, reflect.Func:
		return false
	case reflect.Array:
		return comparesSafely(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !comparesSafely(t.Field(i).Type) {
				return false
			}
		}
	}
	return true
}

// Value is the parent's, but for the record and gRPC's stream, which is
// wrapped: grpc.ServerTransportStreamFromContext finds gRPC's stream under
// a key of gRPC's own, whatever value holds it.
func (c *served) Value(key any) any {
	if _, ok := key.(downstreamKey); ok {
		return &c.rec
	}
	v := c.Context.Value(key)
	if in := c.out.ServerTransportStream; in != nil {
		if s, ok := v.(grpc.ServerTransportStream); ok && s == in {
			return &c.out
		}
	}
	return v
}

// markless is a grpc.ServerTransportStream that takes the Guard's refusal
// marks out of a grpc-status-details-bin set on it, passing everything
// else on as it is.
type markless struct{ grpc.ServerTransportStream }

func (s *markless) SetHeader(md metadata.MD) error {
	return s.ServerTransportStream.SetHeader(withoutForwardedMarks(md))
}

func (s *markless) SendHeader(md metadata.MD) error {
	return s.ServerTransportStream.SendHeader(withoutForwardedMarks(md))
}

func (s *markless) SetTrailer(md metadata.MD) error {
	return s.ServerTransportStream.SetTrailer(withoutForwardedMarks(md))
}

// withoutForwardedMarks returns md with the Guard's refusal marks
// (runtime.ShedReason, runtime.DeadlineReason) taken out of each
// grpc-status-details-bin it holds: those marks say that the server which
// sent them refused the request, and this server did not. The rest of
// each status (code, message, other details) is kept, and so is a value
// that does not decode as a status. md is not changed: a copy is returned
// where a mark is taken out, md itself otherwise (which costs no
// allocation).
func withoutForwardedMarks(md metadata.MD) metadata.MD {
	var out metadata.MD
	for k, vs := range md {
		if !strings.EqualFold(k, statusDetailsKey) {
			continue
		}
		for i, v := range vs {
			stripped, ok := statusWithoutMarks(v)
			if !ok {
				continue
			}
			if out == nil {
				out = md.Copy()
			}
			out[k][i] = stripped
		}
	}
	if out == nil {
		return md
	}
	return out
}

// statusWithoutMarks returns b, a serialized google.rpc.Status, without
// the Guard's refusal marks, and whether it held any.
func statusWithoutMarks(b string) (string, bool) {
	if !strings.Contains(b, runtime.DoNotRetryDomain) {
		return "", false // no mark in it: nothing to decode
	}
	sp := new(spb.Status)
	if proto.Unmarshal([]byte(b), sp) != nil {
		return "", false
	}
	details := status.FromProto(sp).Details()
	kept := sp.Details[:0]
	for i, a := range sp.Details {
		if !isRefusalMark(details[i]) {
			kept = append(kept, a)
		}
	}
	if len(kept) == len(details) {
		return "", false
	}
	sp.Details = kept
	out, err := proto.Marshal(sp)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// guardedStream is a stream handler's grpc.ServerStream behind the Guard:
// its context is the Guard's, and the headers and trailers set on it lose
// the Guard's refusal marks, as those set through its context do.
type guardedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *guardedStream) Context() context.Context { return s.ctx }

func (s *guardedStream) SetHeader(md metadata.MD) error {
	return s.ServerStream.SetHeader(withoutForwardedMarks(md))
}

func (s *guardedStream) SendHeader(md metadata.MD) error {
	return s.ServerStream.SendHeader(withoutForwardedMarks(md))
}

func (s *guardedStream) SetTrailer(md metadata.MD) {
	s.ServerStream.SetTrailer(withoutForwardedMarks(md))
}
