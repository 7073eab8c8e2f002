package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/go-resilient/resilient/internal/check"
	"github.com/go-resilient/resilient/runtime/internal/priority"
	"github.com/go-resilient/resilient/runtime/policy"
)

// Guard applies the server-side policies of the services one gRPC server
// serves: it drops dead requests, sheds load by priority, deduplicates by
// idempotency key and marks failures that must not be retried. It is safe
// for concurrent use.
//
// gRPC takes a single InTapHandle per server, so one Guard holds every
// service of the server; ServerOptions returns what to pass to
// grpc.NewServer.
type Guard struct {
	methods  map[string]*method
	services map[string]*service
	store    Store
	logger   *slog.Logger
	scope    func(context.Context) (string, error) // nil: one scope
	health   storeHealth
	inline   bool // the store never blocks: no goroutine bounds its calls
}

// service is the shared state of one service.
type service struct {
	name string
	shed *shedder // nil without shedding

	deadlineRefused atomic.Uint64
	replayed        atomic.Uint64
	waited          atomic.Uint64
	storeErrors     atomic.Uint64
	ranWithoutDedup atomic.Uint64
	leasesLost      atomic.Uint64
	notKept         atomic.Uint64
	mismatched      atomic.Uint64
	marked          atomic.Uint64
}

// method is the compiled policy of one method.
type method struct {
	name           string
	svc            *service
	priority       Priority
	minDeadline    time.Duration
	dedup          *dedupConfig // nil without dedup
	defaultTimeout time.Duration
	// grants are the values the Guard puts in a request's context for
	// each priority it may grant, one per priority so that granting
	// allocates nothing where the service does not shed (a shed request's
	// grant is its admission's own) and no other Guard granted the
	// request (withGrant).
	grants [PriorityCritical + 1]grant
	// streamLogged: a keyed stream of this deduplicated method was
	// refused and logged (keyedStream logs the first only).
	streamLogged atomic.Bool
}

// Option configures a Guard.
type Option func(*options)

type options struct {
	store       Store
	logger      *slog.Logger
	loggerGiven bool // WithLogger was used: a nil given to it is refused
	scope       func(context.Context) (string, error)
	edits       []edit
}

type edit struct {
	service string
	fn      func(*policy.Server) error
	option  string // "WithPolicy" or "WithCheckedPolicy", for errors
}

// WithPolicy edits the policy of the named service before the Guard is
// built: fn receives a deep copy of the annotated policy (the generated
// literal is never changed) and the result is validated like the
// annotations. It is how an operator's overrides of the limits, the
// deadlines or the dedup choices are applied at start-up.
func WithPolicy(service string, fn func(p *policy.Server)) Option {
	var checked func(*policy.Server) error
	if fn != nil {
		checked = func(p *policy.Server) error { fn(p); return nil }
	}
	return func(o *options) { o.edits = append(o.edits, edit{service, checked, "WithPolicy"}) }
}

// WithCheckedPolicy is WithPolicy for an edit that can refuse the policy
// it is given (an override whose group an earlier edit took away, as
// override.Set.ServerOptions' edits do): NewGuard returns its error.
func WithCheckedPolicy(service string, fn func(p *policy.Server) error) Option {
	return func(o *options) { o.edits = append(o.edits, edit{service, fn, "WithCheckedPolicy"}) }
}

// WithStore sets the store of the idempotency entries, required when a
// method deduplicates: NewMemoryStore for one replica or tests,
// redisstore.New for several replicas.
func WithStore(s Store) Option { return func(o *options) { o.store = s } }

// WithLogger sets the logger that receives the store's failures (once per
// episode), lost leases and outcomes that could not be kept (default:
// none). A nil logger is refused by NewGuard: leave the option out to log
// nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger, o.loggerGiven = l, true }
}

// WithKeyScope scopes idempotency keys by caller: scope returns, from the
// context of the request being served, the name of the caller it belongs
// to (its authenticated identity from peer.FromContext or a verified
// token, its tenant from metadata the service trusts), and requests from
// two scopes never share an entry even when they send the same key. An
// error refuses the request: a status error keeps its code, a context's
// error (wrapped or not) is CANCELLED or DEADLINE_EXCEEDED, any other
// error becomes UNAUTHENTICATED.
//
// Without it, every caller of a method shares one scope: two callers that
// choose the same key (an order number, say) collide, the second getting
// the first's answer when its request is identical and INVALID_ARGUMENT
// when it is not, and a caller that learns another's key can read its
// answer. That is safe only when every caller of the service is trusted
// and keys are random.
func WithKeyScope(scope func(ctx context.Context) (string, error)) Option {
	return func(o *options) { o.scope = scope }
}

// NewGuard compiles the policies of the services of one server. It refuses
// a policy that cannot be applied, naming the field, a service given twice,
// and a method that deduplicates without a store. The policies are copied.
func NewGuard(policies []*policy.Server, opts ...Option) (*Guard, error) {
	var o options
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("resilient/server: NewGuard: option %d is nil", i)
		}
		opt(&o)
	}
	if o.loggerGiven && o.logger == nil {
		return nil, errors.New("resilient/server: NewGuard: WithLogger(nil): pass a *slog.Logger, or leave the option out to log nothing")
	}
	if v := reflect.ValueOf(o.store); v.Kind() == reflect.Pointer && v.IsNil() {
		o.store = nil // WithStore((*MemoryStore)(nil)) is no store: refused below where a method deduplicates
	}
	if s, ok := o.store.(interface{ Err() error }); ok {
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("resilient/server: NewGuard: WithStore: %w", err)
		}
	}
	g := &Guard{methods: map[string]*method{}, services: map[string]*service{}, store: o.store, logger: o.logger, scope: o.scope}
	_, g.inline = o.store.(*MemoryStore)
	compiled := make([]policy.Server, 0, len(policies))
	index := map[string]int{}
	for i, p := range policies {
		if p == nil {
			return nil, fmt.Errorf("resilient/server: NewGuard: policy %d is nil", i)
		}
		if _, dup := index[p.Name]; dup {
			return nil, fmt.Errorf("resilient/server: NewGuard: service %s given twice", p.Name)
		}
		index[p.Name] = len(compiled)
		compiled = append(compiled, p.Clone())
	}
	for _, e := range o.edits {
		if e.fn == nil {
			return nil, fmt.Errorf("resilient/server: NewGuard: %s(%q, nil): the edit is nil; give a function that changes the policy", e.option, e.service)
		}
		i, ok := index[e.service]
		if !ok {
			return nil, fmt.Errorf("resilient/server: NewGuard: %s(%q): unknown service: %s", e.option, e.service, heldServices(compiled))
		}
		if err := e.fn(&compiled[i]); err != nil {
			return nil, fmt.Errorf("resilient/server: NewGuard: editing the policy of %s: %w", e.service, err)
		}
	}
	var errs []error
	for i := range compiled {
		p := &compiled[i]
		if len(o.edits) > 0 {
			// A method without its one entry is reported here, once,
			// and not again by Validate.
			if bad := sameMethods(policies[i], p); len(bad) > 0 {
				errs = append(errs, bad...)
				continue
			}
		}
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		svc := &service{name: p.Name}
		if p.Shedding != nil {
			svc.shed = newShedder(p.Name, p.Shedding)
		}
		g.services[p.Name] = svc
		for j := range p.Methods {
			mp := &p.Methods[j]
			m := &method{name: mp.Name, svc: svc, priority: Priority(priority.OrNormal(uint8(mp.Priority))),
				minDeadline: mp.MinDeadline, defaultTimeout: mp.DefaultTimeout}
			for q := range m.grants {
				m.grants[q] = grant{m: m, p: Priority(q)}
			}
			if mp.Dedup != nil {
				if g.store == nil {
					errs = append(errs, fmt.Errorf("resilient/server: %s deduplicates by idempotency key: give NewGuard a store with WithStore (NewMemoryStore for a single replica, redisstore.New for several)", mp.Name))
				}
				if err := checkNewResponse(mp); err != nil {
					errs = append(errs, err)
				}
				m.dedup = newDedupConfig(mp)
			}
			if _, dup := g.methods[mp.Name]; dup {
				errs = append(errs, fmt.Errorf("resilient/server: method %s is in two policies", mp.Name))
			}
			g.methods[mp.Name] = m
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// sameMethods refuses an edit that leaves a method of the annotated
// policy without its one entry (removed, renamed) or changes its Kind: the
// Guard finds a method's policy by its name, and a method without one is
// not guarded at all (no dedup, no shedding by its priority, no minimum
// deadline), lists it twice, names an entry outside the service, or
// changes its Kind. Reordering the entries is harmless.
func sameMethods(annotated, edited *policy.Server) []error {
	var errs []error
	bad := func(method, format string, args ...any) {
		errs = append(errs, fmt.Errorf("resilient/server: NewGuard: WithPolicy(%q): method %s: %s", annotated.Name, method, fmt.Sprintf(format, args...)))
	}
	if edited.Name != annotated.Name {
		return append(errs, fmt.Errorf("resilient/server: NewGuard: WithPolicy(%q): Name changed to %q: it names the service the Guard covers; leave it as generated", annotated.Name, edited.Name))
	}
	check.Entries(annotated.Name, annotated.Methods, edited.Methods, func(m *policy.ServerMethod) string { return m.Name },
		func(want, m *policy.ServerMethod) {
			if m.Kind != want.Kind {
				bad(want.Name, "Kind changed from %s to %s: the kind of an RPC is the .proto's", want.Kind.String(), m.Kind.String())
			}
		}, func(method, why string) { bad(method, "%s", why) })
	return errs
}

// checkNewResponse refuses a deduplicated method's NewResponse that
// returns no message, or a message of another type than the method's
// response where the method is registered (protoregistry): a replay
// decodes the kept response into it, and would panic on the first repeat,
// long after the server started, or send the repeat another message's
// decoding of the bytes (an int64 read as an int32, truncated).
func checkNewResponse(mp *policy.ServerMethod) error {
	msg := mp.NewResponse()
	if msg == nil || !msg.ProtoReflect().IsValid() {
		got := "nil"
		if msg != nil {
			got = fmt.Sprintf("(%T)(nil)", msg)
		}
		return fmt.Errorf("resilient/server: %s: NewResponse returns %s: it must return a new, empty response message, func() proto.Message { return new(<the response type>) }", mp.Name, got)
	}
	svc, name, ok := strings.Cut(strings.TrimPrefix(mp.Name, "/"), "/")
	if !ok {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil // not linked in: nothing to compare with
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil
	}
	if got, want := msg.ProtoReflect().Descriptor().FullName(), md.Output().FullName(); got != want {
		return fmt.Errorf("resilient/server: %s: NewResponse returns a %s, but the method answers %s: a replay would decode the kept response as another message; return new(<%s's Go type>)", mp.Name, got, want, want)
	}
	return nil
}

// heldServices names the services of policies, for the error of an edit
// to another one.
func heldServices(policies []policy.Server) string {
	if len(policies) == 0 {
		return "the Guard was given no policy"
	}
	names := make([]string, len(policies))
	for i := range policies {
		names[i] = policies[i].Name
	}
	slices.Sort(names)
	return "the Guard holds " + strings.Join(names, ", ") + " (write the full service name, as in the .proto's package and service)"
}

// ServerOptions returns the options that install the Guard in a server:
// its InTapHandle (refusals before a request is decoded) and its unary and
// stream interceptors, chained before any other interceptor given to
// grpc.NewServer after them (gRPC runs a grpc.UnaryInterceptor or
// grpc.StreamInterceptor outside every chained one). A server that needs
// its own InTapHandle (gRPC takes one, and a second panics in
// grpc.NewServer) passes UnaryInterceptor and StreamInterceptor with
// grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor instead of
// ServerOptions, and calls TapHandle from its tap, after its own checks,
// returning TapHandle's answer:
// gRPC never cancels the context of a stream its tap refused (not even
// when its connection closes), so a refusal made after TapHandle admitted
// a request keeps the request's place in flight until its deadline or the
// method's DefaultTimeout passes, and with neither for good.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(g.TapHandle),
		grpc.ChainUnaryInterceptor(g.UnaryInterceptor),
		grpc.ChainStreamInterceptor(g.StreamInterceptor),
	}
}

// TapHandle is the Guard's tap.ServerInHandle. For a method in a policy it
// refuses, before the message is decoded, a request that is dead
// (DEADLINE_EXCEEDED) or that the service must shed (the policy's code,
// with a RetryInfo detail giving the pushback); otherwise it takes the
// request's place in flight, given back when the request ends, and gives
// a request without a deadline the method's DefaultTimeout on the context
// gRPC's stream then uses.
func (g *Guard) TapHandle(ctx context.Context, info *tap.Info) (context.Context, error) {
	m := g.methods[info.FullMethodName]
	if m == nil {
		return ctx, nil
	}
	ctx, a, err := g.enter(ctx, m, info.Header)
	if err != nil {
		tapRefused(ctx, m)
		return ctx, err
	}
	ctx = withTapTimeout(ctx, m)
	if a != nil {
		// Tied to the context the DefaultTimeout bounds, not to gRPC's:
		// gRPC never cancels the context of a stream a tap refused (its
		// root is context.Background, not the connection), and a tap of
		// the server's own that refuses the request after this one
		// admitted it would hold the place for good; so it comes back
		// when the DefaultTimeout passes.
		hold(ctx, a)
	}
	return ctx, nil
}

// tapRefused gives back the places the taps of other Guards took for a
// request of m's method that this Guard's tap refuses (two Guards' taps
// chained in one InTapHandle, the outer's TapHandle, then the inner's):
// gRPC does not cancel the context of a stream its tap refused, which is
// what gives back a place taken for a request that never reaches the
// interceptor, and each inner shed or deadline refusal would otherwise
// hold a place of the outer Guard's until the connection closed, until
// the outer shed every request on it; and it stops their DefaultTimeouts'
// timers (stopTimeouts). In a tap, the only grants in the context are
// those of this request's earlier taps.
func tapRefused(ctx context.Context, m *method) {
	stopTimeouts(ctx, m)
	for gr := grantOf(ctx, nil); gr != nil && gr.m.name == m.name; gr = gr.outer {
		if gr.a != nil {
			gr.a.done()
		}
	}
}

// enter checks the deadline, takes a place in flight (where the service
// sheds) and grants the priority, the grant carrying the place, which
// the caller ties to the request's context (hold).
func (g *Guard) enter(ctx context.Context, m *method, md metadata.MD) (context.Context, *admission, error) {
	if err := checkDeadline(ctx, m.name, minDeadlineFor(ctx, m), true); err != nil {
		m.svc.deadlineRefused.Add(1)
		return ctx, nil, err
	}
	p := effectivePriority(md, m.priority)
	if m.svc.shed == nil {
		return withGrant(ctx, m, p, nil), nil, nil
	}
	a, err := m.svc.shed.admit(m.name, p)
	if err != nil {
		return ctx, nil, err
	}
	return withGrant(ctx, m, p, a), a, nil
}

// UnaryInterceptor is the Guard's unary interceptor. For a method in a
// policy it refuses a request whose deadline has become too short, bounds a
// request without deadline by the method's DefaultTimeout, deduplicates by
// idempotency key, and marks the handler's failure do-not-retry when its
// dependency failed after the runtime's retries. Without the TapHandle
// installed it also sheds (after decoding).
func (g *Guard) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m := g.methods[info.FullMethod]
	if m == nil {
		// Outside the policies, the Guard refuses nothing, and a marked
		// refusal passed on is not this server's either.
		resp, err := handler(forRequestOf(ctx, info.FullMethod), req)
		if err != nil {
			err = notRefusedHere(err, info.FullMethod)
		}
		return resp, err
	}
	if g.serving(ctx, m) {
		return handler(ctx, req)
	}
	ctx, sv, err := g.begin(ctx, m)
	if err != nil {
		return nil, err
	}
	defer sv.end()
	sc := newServed(ctx, g, m)
	rec := &sc.rec
	ctx = sc
	if m.dedup != nil {
		// The handler's failure is settled (its refusal marks stripped, the
		// do-not-retry mark added) before dedup keeps it, so that a
		// repeat served from the store gets what the first caller got.
		return g.dedup(ctx, m, req, func(ctx context.Context, req any) (any, error) {
			resp, err := handler(ctx, req)
			return resp, settle(ctx, m, rec, err)
		})
	}
	resp, err := handler(ctx, req)
	return resp, settle(ctx, m, rec, err)
}

// settle is what a handler's failure becomes on its way to the caller: a
// dependency's refusal marks are stripped (notRefusedHere) and the do-not-retry
// mark added where it is due (shouldMark), counted; nil stays nil.
func settle(ctx context.Context, m *method, rec *downstream, err error) error {
	if err == nil || refusedHere(err, m.name) {
		// A refusal of this request by a Guard of this server inside this
		// one is passed on as that Guard settled it (a mark added here
		// would make another error of it, which this Guard's dedup would
		// no longer know for a refusal and could keep).
		return err
	}
	err = notRefusedHere(err, m.name)
	if shouldMark(err, rec) {
		m.svc.marked.Add(1)
		err = markDoNotRetry(ctx, err)
	}
	return err
}

// serving is what a request holds while its handler runs: its place in
// flight (nil without shedding) and the cancel of its default timeout. A
// value, not a closure, so that beginning a request allocates nothing more.
type serving struct {
	a      *admission
	cancel context.CancelFunc
}

// end cancels the default timeout and gives the place in flight back.
func (s serving) end() {
	s.cancel()
	if s.a != nil {
		s.a.done()
	}
}

// begin is what both interceptors do first; the request ends with the
// returned serving's end.
func (g *Guard) begin(ctx context.Context, m *method) (context.Context, serving, error) {
	// Tapped by this Guard for this request, not by another Guard, nor for
	// another request whose context it was made with (an in-process
	// channel that passes values on).
	gr := grantOf(ctx, m)
	tapped := gr != nil
	if !tapped {
		md, _ := metadata.FromIncomingContext(ctx)
		var (
			a   *admission
			err error
		)
		if ctx, a, err = g.enter(ctx, m, md); err != nil {
			return ctx, serving{}, err
		}
		if a != nil {
			hold(ctx, a)
		}
		gr = grantOf(ctx, m)
	}
	a := gr.a
	if a != nil && !a.serve() {
		// The stream ended (its deadline, a reset) between the tap and
		// here, and its place was given back then.
		if err := ctx.Err(); err != nil {
			return ctx, serving{}, status.FromContextError(err).Err()
		}
		return ctx, serving{}, status.Errorf(codes.Canceled, "resilient: %s ended before it was started", m.name)
	}
	// Time passed since the tap: decoding, queueing for a server worker.
	// Without the tap, enter has just checked it.
	if tapped {
		if err := checkDeadline(ctx, m.name, minDeadlineFor(ctx, m), false); err != nil {
			m.svc.deadlineRefused.Add(1)
			if a != nil {
				a.done()
			}
			return ctx, serving{}, err
		}
	}
	ctx, cancel := withDefaultTimeout(ctx, m)
	return ctx, serving{a: a, cancel: cancel}, nil
}

// StreamInterceptor is the Guard's stream interceptor: the deadline checks,
// the default timeout, the place in flight held until the handler returns,
// and the do-not-retry mark, as for unary methods. Streams are not
// deduplicated.
func (g *Guard) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	m := g.methods[info.FullMethod]
	if m == nil {
		if ctx := forRequestOf(ss.Context(), info.FullMethod); ctx != ss.Context() {
			ss = &guardedStream{ServerStream: ss, ctx: ctx}
		}
		if err := handler(srv, ss); err != nil {
			return notRefusedHere(err, info.FullMethod) // as UnaryInterceptor's
		}
		return nil
	}
	if g.serving(ss.Context(), m) {
		return handler(srv, ss)
	}
	ctx, sv, err := g.begin(ss.Context(), m)
	if err != nil {
		return err
	}
	defer sv.end()
	if m.dedup != nil {
		if err := g.keyedStream(ctx, m); err != nil {
			return err
		}
	}
	sc := newServed(ctx, g, m)
	return settle(sc, m, &sc.rec, handler(srv, &guardedStream{ServerStream: ss, ctx: sc}))
}

// serving reports whether this Guard's interceptor is already serving m's
// request of ctx: its interceptors were installed twice (ServerOptions and
// UnaryInterceptor in a chain), and the inner one passes the request on
// rather than taking a second place in flight or claiming the key again.
// A request to another method made with a served request's context (an
// in-process channel that passes its values on) is served on its own.
func (g *Guard) serving(ctx context.Context, m *method) bool {
	d, ok := ctx.Value(downstreamKey{}).(*downstream)
	return ok && d.guard == g && d.method == m
}

// Stats counts what the Guard did for one service since it was built.
type Stats struct {
	// InFlight is the number of requests of the service admitted and not
	// yet ended (0 without shedding: they are not counted).
	InFlight int
	// Admitted and Shed count the requests admitted and refused by the
	// shedding, by granted priority.
	Admitted, Shed [PriorityCritical + 1]uint64
	// DeadlineRefused counts the requests refused as dead.
	DeadlineRefused uint64
	// Replayed counts the repeats answered from the store; Waited those of
	// them (and of the repeats that gave up) that arrived while the first
	// was running and waited for it.
	Replayed, Waited uint64
	// StoreErrors counts failed store operations (an operation the store
	// did not answer within StoreTimeout, or within the quarter of a
	// request's time a first claim under StoreErrorRunWithoutDedup is
	// waited for, a claim answered no faster than half the method's Lease
	// (the longest a renewal is waited for), and one
	// that panicked, included; a claim its request's
	// end stopped waiting for counts only if the store then fails it or is
	// silent for all of StoreTimeout); RanWithoutDedup the
	// requests run without dedup because of one (OnStoreError).
	StoreErrors, RanWithoutDedup uint64
	// LeasesLost counts the running requests that lost their key (their
	// handler's context cancelled with ErrLeaseLost); NotKept the outcomes
	// that could not be serialized or written before the lease lapsed, whose repeats
	// may run the handler again.
	LeasesLost, NotKept uint64
	// Mismatched counts the requests refused because their key had been
	// used by a different request.
	Mismatched uint64
	// MarkedDoNotRetry counts the failures sent with the do-not-retry mark.
	MarkedDoNotRetry uint64
}

// Stats returns the counts of the named service, and false for a service
// the Guard does not hold.
func (g *Guard) Stats(service string) (Stats, bool) {
	svc := g.services[service]
	if svc == nil {
		return Stats{}, false
	}
	s := Stats{
		DeadlineRefused: svc.deadlineRefused.Load(),
		Replayed:        svc.replayed.Load(), Waited: svc.waited.Load(),
		StoreErrors: svc.storeErrors.Load(), RanWithoutDedup: svc.ranWithoutDedup.Load(),
		LeasesLost: svc.leasesLost.Load(), NotKept: svc.notKept.Load(), Mismatched: svc.mismatched.Load(),
		MarkedDoNotRetry: svc.marked.Load(),
	}
	if sh := svc.shed; sh != nil {
		s.InFlight = int(sh.inFlight.Load())
		for p := range s.Admitted {
			s.Admitted[p] = sh.admitted[p].Load()
			s.Shed[p] = sh.shed[p].Load()
		}
	}
	return s, true
}

// scopeOf returns the scope of the request's idempotency key.
func (g *Guard) scopeOf(ctx context.Context, m *method) (string, error) {
	if g.scope == nil {
		return "", nil
	}
	s, err := g.scope(ctx)
	if err == nil {
		return s, nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
		return "", refuse(m.name, st.Proto())
	}
	code := codes.Unauthenticated
	if c := status.FromContextError(err).Code(); c == codes.Canceled || c == codes.DeadlineExceeded {
		// The request ended (or the scope's own call timed out) while
		// the caller was being told apart: not a caller the service
		// refuses, and UNAUTHENTICATED would be an answer its client
		// never retries.
		code = c
	}
	return "", refusef(m.name, code, "resilient: %s: cannot tell which caller the idempotency key belongs to: %v", m.name, err)
}
