// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/internal/codename"
	"github.com/go-resilient/resilient/internal/contract"
)

// Server is the server-side policy of one service. Generated code holds
// one as a Go literal (XxxServerPolicy); runtime/server's NewGuard
// compiles one or more of them.
type Server struct {
	// Name is the full name of the service ("example.inventory.v1.InventoryService").
	Name string
	// Shedding, when not nil, bounds the requests of the service in flight
	// by priority. Nil means no shedding.
	Shedding *Shedding
	// Methods holds the policy of each method. A method of the service that
	// is not listed is served untouched.
	Methods []ServerMethod
}

// Shedding bounds the requests in flight in one service, all methods
// together, with a cumulative limit per priority: a request of priority p is
// admitted while fewer than Limits.For(p) requests of the service are in
// flight. With {Low: 30, Normal: 60, High: 90, Critical: 120}, low requests
// are refused from 30 in flight on, critical ones only from 120: low is
// shed first, critical last.
type Shedding struct {
	// Limits are the cumulative in-flight limits, each positive and none
	// smaller than the one of a lower priority.
	Limits Limits
	// Pushback is how long a refused caller is asked to wait before trying
	// again, sent in a google.rpc.RetryInfo status detail and in the
	// message. Zero means DefaultShedPushback.
	Pushback time.Duration
	// Code is the code of a refusal: codes.Unavailable (the default, when
	// zero: the client runtime retries it, after the pushback, possibly on
	// another replica) or codes.ResourceExhausted (not retried by default).
	Code codes.Code
}

// DefaultShedPushback is the pushback of a Shedding that sets none.
const DefaultShedPushback = contract.ShedPushback

// Limits are the cumulative in-flight limits of a Shedding, one per
// priority.
type Limits struct {
	Low, Normal, High, Critical int
}

// For returns the limit of priority p; PriorityUnspecified counts as
// PriorityNormal.
func (l Limits) For(p Priority) int {
	switch p {
	case PriorityLow:
		return l.Low
	case PriorityHigh:
		return l.High
	case PriorityCritical:
		return l.Critical
	}
	return l.Normal
}

// ServerMethod is the server-side policy of one method.
type ServerMethod struct {
	// Name is the full method name as gRPC sends it: "/pkg.Service/Method".
	Name string
	// Kind is the kind of RPC. Dedup applies to unary methods only.
	Kind Kind
	// Priority is the method's priority for shedding. A caller may lower it
	// with the resilient-priority header, never raise it. Unspecified means
	// PriorityNormal.
	Priority Priority
	// MinDeadline is the least time a request must have left to be
	// started; a request with less is refused with DEADLINE_EXCEEDED before
	// it is decoded. Zero refuses only requests whose deadline has passed.
	MinDeadline time.Duration
	// DefaultTimeout bounds the handler's context when the caller sent no
	// deadline. Zero means none.
	DefaultTimeout time.Duration
	// Dedup, when not nil, deduplicates requests by their idempotency key.
	Dedup *Dedup
	// NewResponse returns an empty response message of the method, into
	// which a stored response is decoded. Required with Dedup; generated
	// code sets it to func() proto.Message { return new(XxxResponse) }.
	NewResponse func() proto.Message
}

// Dedup says how requests with an idempotency key are deduplicated.
type Dedup struct {
	// Header is the metadata key that carries the idempotency key. Empty
	// means runtime.IdempotencyKeyHeader ("idempotency-key"), which the
	// generated clients send; a request without Header (or with one
	// empty value, no key) is read by that one, so that a generated
	// client's retries are deduplicated too. A
	// request without either is not deduplicated. It must be a text metadata key of its own: lower-case
	// letters, digits, '-', '_' and '.', not grpc-… nor …-bin, and not a
	// key every request carries (content-type, user-agent, te, a
	// pseudo-header, the priority header), which would make every request
	// share one key; Validate refuses any other.
	Header string
	// TTL is how long the outcome of a request is kept and returned to
	// repeats. Required, at least MinTTL.
	TTL time.Duration
	// Lease is the longest store outage a running request survives
	// without losing its key. The runtime renews the key every Lease/4
	// while the handler runs; the store keeps it 3/2 Lease past the last
	// renewal; a request that could not renew for 5/4 Lease cancels its
	// handler (ErrLeaseLost). After a crash, a waiting repeat takes over
	// within 3/2 Lease. Zero means DefaultLease; at least MinLease, at
	// most MaxLease (1 h).
	Lease time.Duration
	// OnStoreError says what happens to a request when the store cannot be
	// reached: StoreErrorRefuse (the default) or StoreErrorRunWithoutDedup.
	OnStoreError StoreErrorMode
	// FinalCodes are the error codes that are answers, stored and replayed
	// to repeats like a response. Other errors (UNAVAILABLE, …) free the key
	// so that a repeat runs again. Zero means DefaultFinalCodes. Validate
	// refuses OK, numbers gRPC defines no code for, and CANCELLED and
	// DEADLINE_EXCEEDED: a request ends with them when its caller cancels
	// it or its deadline passes, and kept, that ending would be replayed to
	// every retry of the key for the whole TTL without the handler running
	// again. UNAUTHENTICATED, though an answer (and in DefaultFinalCodes for
	// the client's sake: never retried), is not kept when the Guard or the
	// handler refuses the caller's credentials: they are not part of what
	// the key names, and a retry with fresh ones must run. It is kept as
	// FinalCodes say when a dependency the handler called through the
	// Guard's ClientInterceptor answered it, since the handler may have done
	// its work before that call. Nor is a failure, whatever its code, that
	// the handler gives once its request ended (its caller's deadline or
	// cancellation, the DefaultTimeout): it is likely that ending's, its
	// context's error in a status of its own, unless a call through
	// ClientInterceptor may have done work (answered, or failed but for a
	// dependency Guard's refusal at its door).
	FinalCodes CodeSet
}

// DefaultLease is the lease of a Dedup that sets none.
const DefaultLease = contract.Lease

// MinLease and MinTTL are the least Lease and TTL a Dedup may set:
// the lease is renewed every quarter of it, and a shorter one would lapse
// under an ordinary store round trip; a result kept for less than MinTTL
// would be gone before a client's retries of the request end. MaxLease
// is the longest Lease: a request whose server crashed keeps its key for
// 3/2 of the lease, refusing every repeat. The plugin and the override
// loader refuse the same values.
const (
	MinLease = contract.MinLease
	MaxLease = contract.MaxLease
	MinTTL   = contract.MinTTL
)

// DefaultFinalCodes are the error codes stored as the outcome of a request:
// the answers that running the request again would give again.
var DefaultFinalCodes = CodesOf(contract.AnswerCodes...)

// StoreErrorMode says what a deduplicated method does when its Store cannot
// be reached.
type StoreErrorMode uint8

const (
	// StoreErrorRefuse answers UNAVAILABLE without running the handler:
	// the safe choice, and the default, for a method whose second run
	// costs money.
	StoreErrorRefuse StoreErrorMode = iota
	// StoreErrorRunWithoutDedup runs the handler as if the method had no
	// dedup: the service stays up while the store is down, at the risk of
	// running a repeat twice.
	StoreErrorRunWithoutDedup
)

// String names the mode as its constant, less the prefix: "Refuse",
// "RunWithoutDedup".
func (m StoreErrorMode) String() string {
	switch m {
	case StoreErrorRefuse:
		return "Refuse"
	case StoreErrorRunWithoutDedup:
		return "RunWithoutDedup"
	}
	return fmt.Sprintf("StoreErrorMode(%d)", uint8(m))
}

// Clone returns a deep copy of p.
func (p *Server) Clone() Server {
	c := *p
	c.Shedding = clone(p.Shedding)
	c.Methods = make([]ServerMethod, len(p.Methods))
	for i, m := range p.Methods {
		m.Dedup = clone(m.Dedup)
		c.Methods[i] = m
	}
	return c
}

// Validate checks the policy and returns an error naming every field that
// cannot be applied, or nil.
func (p *Server) Validate() error {
	var errs []error
	r := &reporter{add: func(pr Problem) {
		errs = append(errs, fmt.Errorf("resilient/server: %s: %s: %s", p.Name, pr.Field, pr.Message))
	}}
	if p.Name == "" {
		r.bad("Name", "empty; set the full service name")
	}
	if s := p.Shedding; s != nil {
		s.check("Shedding", r)
	}
	seen := map[string]bool{}
	for i := range p.Methods {
		m := &p.Methods[i]
		f := fmt.Sprintf("Methods[%d] (%s)", i, m.Name)
		prefix := "/" + p.Name + "/"
		switch {
		case !strings.HasPrefix(m.Name, prefix) || len(m.Name) == len(prefix) || strings.Contains(m.Name[len(prefix):], "/"):
			r.bad(f+".Name", "must be %q followed by the method name", prefix)
		case seen[m.Name]:
			r.bad(f+".Name", "listed twice: keep one entry per method")
		}
		seen[m.Name] = true
		checkPriority(m.Priority, f+".Priority", r)
		m.checkDeadlines(f, r)
		d := m.Dedup
		if d == nil {
			continue
		}
		if m.Kind != KindUnary {
			r.bad(f+".Dedup", "only unary methods can be deduplicated")
		}
		if m.NewResponse == nil {
			r.bad(f+".NewResponse", "required with Dedup: set it to func() proto.Message { return new(<the response type>) }")
		}
		d.check(f+".Dedup", r)
	}
	return errors.Join(errs...)
}

// check checks the limits, each positive and none below the limit of a
// lower priority, the pushback and the code of a refusal.
func (s *Shedding) check(f string, r *reporter) {
	l := s.Limits
	prev, prevName := 1, ""
	for _, lim := range []struct {
		name string
		v    int
	}{{"Low", l.Low}, {"Normal", l.Normal}, {"High", l.High}, {"Critical", l.Critical}} {
		field := f + ".Limits." + lim.name
		switch {
		case lim.v <= 0:
			r.fail(field, check.AtLeastOne(int64(lim.v))+"; it is the number of requests in flight from which "+strings.ToLower(lim.name)+"-priority requests are refused", "")
		case lim.v < prev:
			r.pair(field, "", []string{f + ".Limits." + prevName}, text(check.SheddingBelow(int64(lim.v), int64(prev), "Limits."+prevName)), "")
		}
		if lim.v > 0 {
			prev, prevName = lim.v, lim.name
		}
	}
	r.noneAtZero(f+".Pushback", s.Pushback, "")
	if r.given(s.Code != codes.OK) {
		r.fail(f+".Code", check.SheddingCode(codename.Of(s.Code)), "; or leave it OK for UNAVAILABLE")
	}
}

// checkDeadlines checks a server method's min_deadline and
// default_timeout, each on its own and together.
func (m *ServerMethod) checkDeadlines(f string, r *reporter) {
	r.noneAtZero(f+".MinDeadline", m.MinDeadline, "to refuse only the requests whose deadline has passed")
	r.noneAtZero(f+".DefaultTimeout", m.DefaultTimeout, "to leave a request without deadline unbounded")
	if m.DefaultTimeout > 0 && m.DefaultTimeout < m.MinDeadline {
		r.pair(f+".DefaultTimeout", "", []string{f + ".MinDeadline"}, words(fmt.Sprintf("%s is below {MinDeadline} (%s)", m.DefaultTimeout, m.MinDeadline)), "")
	}
}

// check checks the dedup's values on their own.
func (d *Dedup) check(f string, r *reporter) {
	r.fail(f+".TTL", check.DedupTTL(d.TTL), "")
	if r.given(d.Lease != 0) {
		r.report(f+".Lease", "", check.DedupLease(d.Lease), "; or zero for DefaultLease", "", false)
	}
	if d.OnStoreError > StoreErrorRunWithoutDedup {
		r.bad(f+".OnStoreError", "unknown mode %d: StoreErrorRefuse or StoreErrorRunWithoutDedup", d.OnStoreError)
	}
	if d.FinalCodes.Has(codes.OK) {
		r.bad(f+".FinalCodes", "OK is not an error code")
	}
	if u := d.FinalCodes &^ CodeSet(1<<(codes.Unauthenticated+1)-1); u != 0 {
		r.bad(f+".FinalCodes", "holds %s, numbers gRPC defines no code for: name the codes (codes.NotFound)", u)
	}
	if msg := check.DedupFinalCodes(d.FinalCodes.Codes()); msg != "" {
		r.bad(f+".FinalCodes", "%s; list only answers of the service (zero means DefaultFinalCodes)", msg)
	}
	if d.Header != "" {
		if why := dedupHeaderProblem(d.Header); why != "" {
			r.bad(f+".Header", "%q %s", d.Header, why)
		}
	}
}
