package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// gate23j holds every call the client makes, before gRPC sends it (an
// interceptor, as a token fetch would be), until the test releases it:
// each shared call arrives, the test sees who waits for it, then lets it
// go on.
type gate23j struct {
	arrived, release chan struct{}
}

func newGate23j() *gate23j {
	return &gate23j{arrived: make(chan struct{}, 64), release: make(chan struct{}, 64)}
}

func (g *gate23j) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	g.arrived <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// next waits for the next call to reach the gate.
func (g *gate23j) next(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no call reached the client's interceptor in 10s", what)
	}
}

// join23j is a cached GetStock ("apple", cache key its sku) behind a
// gate, on a real loopback server, with the runtime's metrics.
type join23j struct {
	srv  interface{ Calls(string) int }
	cc   *grpc.ClientConn
	gate *gate23j
	m    *runtime.Method
	reg  *prometheus.Registry
	get  func(ctx context.Context, opts ...grpc.CallOption) (*inventoryv1.GetStockResponse, error)
}

func newJoin23j(t *testing.T) *join23j { return newJoin23jOn(t, server.Healthy) }

func newJoin23jOn(t *testing.T, b server.Behaviour, extra ...grpc.DialOption) *join23j {
	g := newGate23j()
	srv, cc := startFault(t, b, append(extra, grpc.WithChainUnaryInterceptor(g.intercept))...)
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: 10 * time.Second,
		Cache: &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10}}}}, runtime.WithRegisterer(reg))
	plain := inventoryv1.NewInventoryServiceClient(cc)
	m := rt.Method(0)
	return &join23j{srv: srv, cc: cc, gate: g, m: m, reg: reg,
		get: func(ctx context.Context, opts ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
			return runtime.UnaryCached(ctx, m, "", skuKey, &inventoryv1.GetStockRequest{Sku: "apple"}, opts, plain.GetStock, nil)
		}}
}

func (j *join23j) waiting(t *testing.T, what string, n int) {
	t.Helper()
	atkWaitFor(t, what, func() bool { return j.m.CacheWaiters23j("apple") == n })
}

// goods starts n callers whose values are fine; their results come on the
// channel returned.
func (j *join23j) goods(ctx context.Context, n int) <-chan error {
	out := make(chan error, n)
	for range n {
		go func() {
			resp, err := j.get(ctx)
			if err == nil && (resp.GetSku() != "apple" || resp.GetUnits() != 42) {
				err = status.Errorf(codes.Unknown, "wrong answer %v", resp)
			}
			out <- err
		}()
	}
	return out
}

// badMetadata is outgoing metadata gRPC refuses to send (a forwarded
// header that is not ASCII); badOption a call option it refuses (a
// content-subtype no codec is registered for). Neither is sent.
func badMetadata(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-forwarded-name", "Zo\xeb")
}

var badOption = grpc.CallContentSubtype("nosuch23j")

func wantOwnFault(t *testing.T, who string, err error, words string) {
	t.Helper()
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), words) {
		t.Errorf("%s: %v, want gRPC's INTERNAL (%q) for its own values", who, err, words)
	}
}

func (j *join23j) wantAnswered(t *testing.T, results <-chan error, n int) {
	t.Helper()
	for i := range n {
		if err := <-results; err != nil {
			t.Errorf("good caller %d of %d: %v, want the answer of the flight it shared", i+1, n, err)
		}
	}
}

func (j *join23j) wantLookups(t *testing.T, misses float64) {
	t.Helper()
	for result, n := range map[string]float64{"miss": misses, "hit": 0, "stale": 0} {
		if got := metricValue(t, j.reg, "resilient_client_cache_lookups_total", "method", "GetStock", "result", result); got != n {
			t.Errorf("cache_lookups_total{result=%q} = %v, want %v (each call one lookup)", result, got, n)
		}
	}
}

// wantNoOtherCall: no call reached the gate besides those the test let go.
func (j *join23j) wantNoOtherCall(t *testing.T, why string) {
	t.Helper()
	select {
	case <-j.gate.arrived:
		t.Errorf("another call reached the client's interceptor: %s", why)
	default:
	}
}

// theRestShareOne: the n callers whose values are fine (results) wait for
// one shared call, the next to reach the gate; the server saw none before
// it (the earlier starters' calls were never sent), and sees that one
// only once the test lets it go; each of the n gets its answer, and no
// other call is made.
func (j *join23j) theRestShareOne(t *testing.T, results <-chan error, n int, earlier string) {
	t.Helper()
	j.gate.next(t, "the joiners' next shared call")
	j.waiting(t, fmt.Sprintf("the %d wait for one shared call", n), n)
	if c := j.srv.Calls(atkGetStock); c != 0 {
		t.Errorf("the server saw %d calls before the joiners' shared call was let go, want 0 (%s never sent)", c, earlier)
	}
	j.gate.release <- struct{}{}
	j.wantAnswered(t, results, n)
	if c := j.srv.Calls(atkGetStock); c != 1 {
		t.Errorf("the server saw %d calls for the %d joiners, want 1 shared", c, n)
	}
	j.wantNoOtherCall(t, "a joiner called on its own")
}

// TestAttack23jJoinersOfAStartersClientFaultShareTheNextCall: caller A
// starts the shared call of "apple" with metadata gRPC cannot send; 8
// callers whose values are fine join it. A's call fails on the client's
// side, which is A's alone (A gets its INTERNAL), and says nothing of the
// others' calls. Before, each of the 8 then made its own unshared call: 8
// calls to the dependency at once, the storm the single flight is there to
// prevent. Now they join the key again: the first starts the next shared
// call with its own values and the 7 others wait for it, so the server
// sees one call, whose answer each of the 8 gets; 9 calls, 9 misses.
func TestAttack23jJoinersOfAStartersClientFaultShareTheNextCall(t *testing.T) {
	atkNoLeak(t)
	j := newJoin23j(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 8

	aErr := make(chan error, 1)
	go func() { _, err := j.get(badMetadata(ctx)); aErr <- err }()
	j.gate.next(t, "A's shared call")
	results := j.goods(ctx, n)
	j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
	j.gate.release <- struct{}{}
	wantOwnFault(t, "caller A", <-aErr, `header key "x-forwarded-name"`)

	j.theRestShareOne(t, results, n, "A's was")
	j.wantLookups(t, 1+n)
}

// TestAttack23jTheNextStarterHasAClientFaultToo: A starts the shared call
// with unsendable metadata and B, whose call option names a codec never
// registered, joins it. A's call fails with A's fault; B joins the key
// again and, alone, starts the next shared call with its own values,
// which 8 callers whose values are fine then join. B's call fails with
// B's fault (B gets it, not A's): the 8 join again and share one third
// call, made with one of theirs. The server sees that one call only; each
// of the 8 gets its answer; 10 calls, 10 misses.
func TestAttack23jTheNextStarterHasAClientFaultToo(t *testing.T) {
	atkNoLeak(t)
	j := newJoin23j(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 8

	aErr, bErr := make(chan error, 1), make(chan error, 1)
	go func() { _, err := j.get(badMetadata(ctx)); aErr <- err }()
	j.gate.next(t, "A's shared call")
	go func() { _, err := j.get(ctx, badOption); bErr <- err }()
	j.waiting(t, "A and B wait for A's shared call", 2)
	j.gate.release <- struct{}{}
	wantOwnFault(t, "caller A", <-aErr, `header key "x-forwarded-name"`)

	j.gate.next(t, "B's shared call")
	j.waiting(t, "B alone waits for its shared call", 1)
	results := j.goods(ctx, n)
	j.waiting(t, "B and the 8 wait for B's shared call", 1+n)
	j.gate.release <- struct{}{}
	wantOwnFault(t, "caller B", <-bErr, "no codec registered for content-subtype nosuch23j")

	j.theRestShareOne(t, results, n, "A's and B's were")
	j.wantLookups(t, 2+n)
}

// TestAttack23jAClosedConnFailsEveryWaiterAtOnce: A starts the shared
// call, 8 callers join it, and the program closes the ClientConn before
// the call is sent. gRPC's CANCELLED "the client connection is closing"
// is a client fault, but no caller's own: every caller's call would end
// so. Each of the 9 gets it from the one shared call; none joins the key
// again to start another (which would make 8 turns, one after another, of
// calls that cannot be sent).
func TestAttack23jAClosedConnFailsEveryWaiterAtOnce(t *testing.T) {
	atkNoLeak(t)
	j := newJoin23j(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 8

	errs := make(chan error, 1+n)
	go func() { _, err := j.get(ctx); errs <- err }()
	j.gate.next(t, "A's shared call")
	for range n {
		go func() { _, err := j.get(ctx); errs <- err }()
	}
	j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
	j.cc.Close()
	j.gate.release <- struct{}{}
	for i := range 1 + n {
		select {
		case err := <-errs:
			if status.Code(err) != codes.Canceled || !strings.Contains(status.Convert(err).Message(), "client connection is closing") {
				t.Errorf("caller %d of %d: %v, want gRPC's CANCELLED of a closed ClientConn", i+1, 1+n, err)
			}
		case <-j.gate.arrived:
			t.Fatalf("after %d of %d callers failed, another call reached the client's interceptor: a waiter called again", i, 1+n)
		}
	}
	j.wantNoOtherCall(t, "a waiter called again")
	if c := j.srv.Calls(atkGetStock); c != 0 {
		t.Errorf("the server saw %d calls, want 0", c)
	}
	j.wantLookups(t, 1+n)
}

// TestAttack23jAnAnswerKeptMeanwhileServesTheJoiners: X's shared call is
// on the wire, held by the server, when X gives up: the call is abandoned
// and goes on. A then starts a new shared call with unsendable metadata
// and 8 callers join it; X's call answers meanwhile and its answer is
// kept, fresh. When A's call fails with A's fault, the 8 find that fresh
// answer, as a caller arriving then would: no new call is made (the
// server sees X's only).
func TestAttack23jAnAnswerKeptMeanwhileServesTheJoiners(t *testing.T) {
	atkNoLeak(t)
	held := make(chan struct{})
	j := newJoin23jOn(t, func(ctx context.Context, _ server.Call) error {
		select {
		case <-held:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 8

	xCtx, xCancel := context.WithCancel(ctx)
	xErr := make(chan error, 1)
	go func() { _, err := j.get(xCtx); xErr <- err }()
	j.gate.next(t, "X's shared call")
	j.gate.release <- struct{}{}
	atkWaitFor(t, "X's call on the server", func() bool { return j.srv.Calls(atkGetStock) == 1 })
	xCancel()
	if err := <-xErr; status.Code(err) != codes.Canceled {
		t.Fatalf("caller X: %v, want its CANCELLED", err)
	}

	aErr := make(chan error, 1)
	go func() { _, err := j.get(badMetadata(ctx)); aErr <- err }()
	j.gate.next(t, "A's shared call")
	results := j.goods(ctx, n)
	j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
	close(held)
	atkWaitFor(t, "X's late answer kept", func() bool { return j.m.CacheHolds23j("apple") })
	j.gate.release <- struct{}{}
	wantOwnFault(t, "caller A", <-aErr, `header key "x-forwarded-name"`)
	for i := range n {
		select {
		case err := <-results:
			if err != nil {
				t.Errorf("good caller %d of %d: %v, want the fresh answer kept", i+1, n, err)
			}
		case <-j.gate.arrived:
			t.Fatalf("after %d of %d callers were answered, a new call reached the client's interceptor, with a fresh answer kept", i, n)
		}
	}
	if c := j.srv.Calls(atkGetStock); c != 1 {
		t.Errorf("the server saw %d calls, want X's only", c)
	}
	j.wantLookups(t, 2+n)
}

// TestAttack23jASizeLimitIsTheStartersOnlyWhenItSetsOne: a response past
// a receive limit fails on the client's side after the server answered.
// When the limit is the starter's own call option, the 8 who joined it
// share the next call (the server sees the starter's and that one); when
// it is the ClientConn's, every caller's call would fail so, and the 8
// get the failure at once: joining again, one turn per waiter, would send
// the request 8 more times, one after the other. The limit is the
// starter's only for the way its option limits: a starter that raised its
// send limit sends a request the server's receive limit refuses, in the
// words of a receive limit, which every caller's request would meet
// (before: the first of the 8 sent its own); a starter whose own send
// limit refuses its request sent nothing, and the 8 share the next call.
func TestAttack23jASizeLimitIsTheStartersOnlyWhenItSetsOne(t *testing.T) {
	const n = 8
	for _, tc := range []struct {
		name      string
		dial      []grpc.DialOption
		serve     []grpc.ServerOption
		own       []grpc.CallOption
		shared    bool // the 8 share a next call
		wantCalls int  // that reach the server's handler
	}{
		{name: "the starter's option", own: []grpc.CallOption{grpc.MaxCallRecvMsgSize(4)}, shared: true, wantCalls: 2},
		{name: "the ClientConn's", dial: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(4))}, wantCalls: 1},
		{name: "the server's receive limit, the starter's send limit raised", serve: []grpc.ServerOption{grpc.MaxRecvMsgSize(4)},
			own: []grpc.CallOption{grpc.MaxCallSendMsgSize(1 << 20)}},
		{name: "the starter's send limit", own: []grpc.CallOption{grpc.MaxCallSendMsgSize(4)}, shared: true, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			j := newJoin23cWith(t, server.Healthy, tc.serve, tc.dial...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			aErr := make(chan error, 1)
			go func() { _, err := j.get(ctx, tc.own...); aErr <- err }()
			j.gate.next(t, "A's shared call")
			results := j.goods(ctx, n)
			j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
			j.gate.release <- struct{}{}
			if err := <-aErr; status.Code(err) != codes.ResourceExhausted {
				t.Errorf("caller A: %v, want gRPC's RESOURCE_EXHAUSTED of the receive limit", err)
			}
			if tc.shared {
				j.gate.next(t, "the joiners' next shared call")
				j.waiting(t, "the 8 wait for one shared call", n)
				j.gate.release <- struct{}{}
				j.wantAnswered(t, results, n)
			} else {
				for i := range n {
					select {
					case err := <-results:
						if status.Code(err) != codes.ResourceExhausted {
							t.Errorf("caller %d of %d: %v, want the RESOURCE_EXHAUSTED its own call would get", i+1, n, err)
						}
					case <-j.gate.arrived:
						t.Fatalf("after %d of %d callers failed, another call reached the client's interceptor: a waiter called again", i, n)
					}
				}
			}
			j.wantNoOtherCall(t, "a waiter called again")
			if c := j.srv.Calls(atkGetStock); c != tc.wantCalls {
				t.Errorf("the server's handler ran %d times, want %d", c, tc.wantCalls)
			}
			j.wantLookups(t, 1+n)
		})
	}
}

// TestAttack23jTheSharedCallReadsNoCallersOptionsAfterItReturns: the
// shared call may outlive the caller that started it, who owns its call
// options again once it returns (a slice it reuses): the call must read
// them before that caller can return, as it copies the request. Caller L
// starts the shared call and gives up at once; once L returned, the test
// writes L's slice of options; -race sees the shared call read it after.
func TestAttack23jTheSharedCallReadsNoCallersOptionsAfterItReturns(t *testing.T) {
	atkNoLeak(t)
	j := newJoin23j(t)
	ctx, cancel := context.WithCancel(context.Background())
	opts := []grpc.CallOption{grpc.WaitForReady(false), grpc.MaxCallRecvMsgSize(1 << 20)}
	done := make(chan error, 1)
	go func() { _, err := j.get(ctx, opts...); done <- err }()
	j.waiting(t, "L waits for its shared call", 1)
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("caller L: %v, want its CANCELLED", err)
	}
	opts[0], opts[1] = grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(1) // L's own again
	// The shared call, if it got as far as the gate, goes on.
	j.gate.release <- struct{}{}
}
