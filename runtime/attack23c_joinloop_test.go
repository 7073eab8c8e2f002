package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// replyFails23c is a server's codec, gRPC's own, but for GetStock's reply,
// which does not marshal: the server ran the call, then answers INTERNAL
// "grpc: error while marshaling: …", the words gRPC gives a client's
// request that does not marshal.
type replyFails23c struct{}

func (replyFails23c) Marshal(v any) (mem.BufferSlice, error) {
	if _, ok := v.(*inventoryv1.GetStockResponse); ok {
		return nil, errors.New("attack23c: the server's reply does not marshal")
	}
	return encoding.GetCodecV2(protocodec.Name).Marshal(v)
}

func (replyFails23c) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(protocodec.Name).Unmarshal(data, v)
}

func (replyFails23c) Name() string { return protocodec.Name }

// newJoin23cWith is newJoin23jOn with server options.
func newJoin23cWith(t *testing.T, b server.Behaviour, serve []grpc.ServerOption, extra ...grpc.DialOption) *join23j {
	return newJoin23cClock(t, b, serve, nil, extra...)
}

// newJoin23cClock is newJoin23cWith on clock (nil: the real one), its
// server returned too.
func newJoin23cClock(t *testing.T, b server.Behaviour, serve []grpc.ServerOption, clock runtime.Clock, extra ...grpc.DialOption) *join23j {
	g := newGate23j()
	srv, cc := startFaultWith(t, b, serve, append(extra, grpc.WithChainUnaryInterceptor(g.intercept))...)
	reg := prometheus.NewRegistry()
	opts := []runtime.Option{runtime.WithRegisterer(reg)}
	if clock != nil {
		opts = append(opts, runtime.WithClock(clock))
	}
	rt := inventory(t, policy.Service{Methods: []policy.Method{{Name: getStock, Idempotent: true, Timeout: 10 * time.Second,
		Cache: &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Hour, MaxEntries: 10}}}}, opts...)
	plain := inventoryv1.NewInventoryServiceClient(cc)
	m := rt.Method(0)
	return &join23j{srv: srv, cc: cc, gate: g, m: m, reg: reg,
		get: func(ctx context.Context, opts ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
			return runtime.UnaryCached(ctx, m, "", skuKey, &inventoryv1.GetStockRequest{Sku: "apple"}, opts, plain.GetStock, nil)
		}}
}

// TestAttack23cAServersMarshalFailureIsEveryWaitersAtOnce: the server runs
// GetStock, then fails to marshal its reply: INTERNAL "grpc: error while
// marshaling", in the words gRPC gives a request of the caller's that does
// not marshal, but the call was sent and run, and every caller's call
// would end so. A starts the shared call, 8 callers join it: each of the 9
// gets the server's failure from that one call, and the server sees 1
// call; none joins the key again to send it once more, one after the
// other.
func TestAttack23cAServersMarshalFailureIsEveryWaitersAtOnce(t *testing.T) {
	const n = 8
	for _, tc := range []struct {
		name string
		opts []grpc.CallOption
	}{
		{name: "a plain call"},
		// The runtime's own codec of a call that sends an idempotency key
		// is no choice of the starter's.
		{name: "a keyed call", opts: runtime.KeyedOptions23c()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			j := newJoin23cWith(t, server.Healthy, []grpc.ServerOption{grpc.ForceServerCodecV2(replyFails23c{})})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			errs := make(chan error, 1+n)
			go func() { _, err := j.get(ctx, tc.opts...); errs <- err }()
			j.gate.next(t, "A's shared call")
			for range n {
				go func() { _, err := j.get(ctx, tc.opts...); errs <- err }()
			}
			j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
			j.gate.release <- struct{}{}
			for i := 0; i < 1+n; {
				select {
				case err := <-errs:
					i++
					if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "error while marshaling") {
						t.Errorf("caller %d of %d: %v, want the server's INTERNAL", i, 1+n, err)
					}
				case <-j.gate.arrived:
					j.gate.release <- struct{}{} // let it go on, to count it on the server
					t.Errorf("after %d of %d callers failed, another call reached the client's interceptor: a waiter sent the call again", i, 1+n)
				}
			}
			if c := j.srv.Calls(atkGetStock); c != 1 {
				t.Errorf("the server ran GetStock %d times, want 1 shared", c)
			}
			j.wantLookups(t, 1+n)
		})
	}
}

// reqFails23c is a client's codec, gRPC's own, but for GetStock's
// request, which does not marshal.
type reqFails23c struct{ replyFails23c }

func (reqFails23c) Marshal(v any) (mem.BufferSlice, error) {
	if _, ok := v.(*inventoryv1.GetStockRequest); ok {
		return nil, errors.New("attack23c: the caller's request does not marshal")
	}
	return encoding.GetCodecV2(protocodec.Name).Marshal(v)
}

// TestAttack23cTheStartersOwnMarshalFailureIsStillItsOwn: the marshal
// failure of a shared call whose starter's own values caused it, its
// request (a string that is not UTF-8, under the same key) or its codec
// option, is the starter's alone: the 8 who joined it share the next
// call, which the server sees alone.
func TestAttack23cTheStartersOwnMarshalFailureIsStillItsOwn(t *testing.T) {
	const n = 8
	for _, tc := range []struct {
		name string
		req  *inventoryv1.GetStockRequest
		opts []grpc.CallOption
	}{
		{name: "its request", req: &inventoryv1.GetStockRequest{Sku: "appl\xe9"}},
		{name: "its codec option", req: &inventoryv1.GetStockRequest{Sku: "apple"}, opts: []grpc.CallOption{grpc.ForceCodecV2(reqFails23c{})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atkNoLeak(t)
			j := newJoin23j(t)
			plain := inventoryv1.NewInventoryServiceClient(j.cc)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			aErr := make(chan error, 1)
			go func() {
				_, err := runtime.UnaryCached(ctx, j.m, "", func(*inventoryv1.GetStockRequest) string { return "apple" }, tc.req, tc.opts, plain.GetStock, nil)
				aErr <- err
			}()
			j.gate.next(t, "A's shared call")
			results := j.goods(ctx, n)
			j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
			j.gate.release <- struct{}{}
			wantOwnFault(t, "caller A", <-aErr, "error while marshaling")

			j.gate.next(t, "the joiners' next shared call")
			j.waiting(t, "the 8 wait for one shared call", n)
			if c := j.srv.Calls(atkGetStock); c != 0 {
				t.Errorf("the server saw %d calls before the joiners' shared call was let go, want 0 (A's was never sent)", c)
			}
			j.gate.release <- struct{}{}
			j.wantAnswered(t, results, n)
			if c := j.srv.Calls(atkGetStock); c != 1 {
				t.Errorf("the server saw %d calls for the 8 joiners, want 1 shared", c)
			}
			j.wantLookups(t, 1+n)
		})
	}
}

// TestAttack23cEveryCallersBadMetadataEndsAtOnceSendingNothing: an
// interceptor of the ClientConn adds metadata gRPC cannot send to every
// call: the shared call fails on the client's side, but not of its
// starter's own values (its metadata is fine: see startersOwn), so every
// waiter gets that failure at once (before attack24a, each took a turn:
// 9 shared calls, one after the other). The server sees nothing, and
// attempts_total counts the one attempt made, INTERNAL.
func TestAttack23cEveryCallersBadMetadataEndsAtOnceSendingNothing(t *testing.T) {
	atkNoLeak(t)
	bad := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(badMetadata(ctx), method, req, reply, cc, opts...)
	})
	j := newJoin23cWith(t, server.Healthy, nil, bad)
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
	j.gate.release <- struct{}{}
	turns := 1
	for i := 0; i < 1+n; {
		select {
		case err := <-errs:
			i++
			wantOwnFault(t, "a caller", err, `header key "x-forwarded-name"`)
		case <-j.gate.arrived:
			turns++
			j.gate.release <- struct{}{}
		case <-ctx.Done():
			t.Fatalf("after %d turns, %d of %d callers ended: the turns do not end", turns, i, 1+n)
		}
	}
	if turns != 1 {
		t.Errorf("%d shared calls for %d callers, want 1: the fault is every caller's", turns, 1+n)
	}
	if c := j.srv.Calls(atkGetStock); c != 0 {
		t.Errorf("the server saw %d calls, want 0", c)
	}
	j.wantLookups(t, 1+n)
	if got := metricValue(t, j.reg, "resilient_client_attempts_total", "method", "GetStock", "code", "INTERNAL"); got != 1 {
		t.Errorf("attempts_total{code=INTERNAL} = %v, want 1: the one shared call's attempt", got)
	}
}

type panicMark23c struct{}

// TestAttack23cAPanicInTheNextTurnReachesItsWaiters: A's shared call
// fails with A's unsendable metadata; the 8 who joined it share the next,
// started with the values of one of them, on which an interceptor
// panics. Each of the 8 panics with it (as for a first shared call's
// panic), none hangs or calls again, and nothing reaches the server.
func TestAttack23cAPanicInTheNextTurnReachesItsWaiters(t *testing.T) {
	atkNoLeak(t)
	boom := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if ctx.Value(panicMark23c{}) != nil {
			panic("attack23c: the interceptor panics")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	j := newJoin23cWith(t, server.Healthy, nil, boom)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 8

	aErr := make(chan error, 1)
	go func() { _, err := j.get(badMetadata(ctx)); aErr <- err }()
	j.gate.next(t, "A's shared call")
	panics := make(chan any, n)
	marked := context.WithValue(ctx, panicMark23c{}, true)
	for range n {
		go func() {
			defer func() { panics <- recover() }()
			_, _ = j.get(marked)
		}()
	}
	j.waiting(t, "A and the 8 wait for A's shared call", 1+n)
	j.gate.release <- struct{}{}
	wantOwnFault(t, "caller A", <-aErr, `header key "x-forwarded-name"`)
	for i := range n {
		select {
		case p := <-panics:
			if p != "attack23c: the interceptor panics" {
				t.Errorf("caller %d of %d: recovered %v, want the interceptor's panic", i+1, n, p)
			}
		case <-j.gate.arrived:
			t.Fatalf("after %d of %d callers panicked, another call reached the gate: a waiter called again", i, n)
		case <-ctx.Done():
			t.Fatalf("%d of %d callers ended", i, n)
		}
	}
	if c := j.srv.Calls(atkGetStock); c != 0 {
		t.Errorf("the server saw %d calls, want 0", c)
	}
	j.wantLookups(t, 1+n)
}

// TestAttack23cAStaleAnswerAcrossTurns: GetStock's answer is kept, no
// longer fresh, still within stale_ttl, and the server now fails
// UNAVAILABLE. A starts the shared call with unsendable metadata and
// gets its own INTERNAL, not the stale answer (a client-side failure is
// never hidden); the 8 who joined it, and J, share the next call. J's
// deadline runs out while that call is held: J gets the stale answer at
// once. The call then fails UNAVAILABLE: the 8 get the stale answer.
// Each call is counted once: the priming call and A a miss, the 9 stale,
// and 9 stale_cache fallbacks; the server saw the priming call and the
// 8's, no other.
func TestAttack23cAStaleAnswerAcrossTurns(t *testing.T) {
	atkNoLeak(t)
	clock := newFakeClock()
	j := newJoin23cClock(t, server.Healthy, nil, clock)
	srv := j.srv.(interface{ SetBehaviour(server.Behaviour) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 8

	primed := j.goods(ctx, 1)
	j.gate.next(t, "the priming call")
	j.gate.release <- struct{}{}
	j.wantAnswered(t, primed, 1)
	clock.Advance(time.Minute + time.Second) // past fresh_ttl, within stale_ttl
	srv.SetBehaviour(server.Fail(codes.Unavailable))

	aErr := make(chan error, 1)
	go func() { _, err := j.get(badMetadata(ctx)); aErr <- err }()
	j.gate.next(t, "A's shared call")
	results := j.goods(ctx, n)
	jCtx, jCancel := context.WithTimeout(ctx, time.Second)
	defer jCancel()
	jDone := make(chan error, 1)
	go func() {
		resp, err := j.get(jCtx)
		if err == nil && resp.GetUnits() != 42 {
			err = status.Errorf(codes.Unknown, "wrong answer %v", resp)
		}
		jDone <- err
	}()
	j.waiting(t, "A, the 8 and J wait for A's shared call", 2+n)
	j.gate.release <- struct{}{}
	wantOwnFault(t, "caller A", <-aErr, `header key "x-forwarded-name"`)
	j.gate.next(t, "the joiners' next shared call")
	if err := <-jDone; err != nil {
		t.Errorf("caller J, whose deadline ran out: %v, want the stale answer", err)
	}
	j.gate.release <- struct{}{}
	j.wantAnswered(t, results, n)
	select {
	case <-j.gate.arrived:
		t.Error("another call reached the client's interceptor")
	default:
	}
	if c := j.srv.Calls(atkGetStock); c != 2 {
		t.Errorf("the server saw %d calls, want 2: the priming one and the joiners' one", c)
	}
	for result, want := range map[string]float64{"miss": 2, "hit": 0, "stale": 1 + n} {
		if got := metricValue(t, j.reg, "resilient_client_cache_lookups_total", "method", "GetStock", "result", result); got != want {
			t.Errorf("cache_lookups_total{result=%q} = %v, want %v (each call one lookup)", result, got, want)
		}
	}
	if got := fallbackCount(t, j.reg, "stale_cache"); got != 1+n {
		t.Errorf("fallbacks_total{cause=stale_cache} = %v, want %d", got, 1+n)
	}
}

// TestAttack23cOnFinishOncePerCallerAcrossTurns: through the generated
// client, A starts GetStock's shared call with unsendable metadata and a
// grpc.OnFinish; 8 callers with an OnFinish each join it and share the
// next call. Each callback runs once, with what its caller got (A its
// INTERNAL, the 8 nil), not once per turn nor on the shared call's
// goroutine; the server sees one call.
func TestAttack23cOnFinishOncePerCallerAcrossTurns(t *testing.T) {
	atkNoLeak(t)
	g := newGate23j()
	srv, cc := startFault(t, server.Healthy, grpc.WithChainUnaryInterceptor(g.intercept))
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{}, func(p *policy.Service) {
		p.Breaker, p.AdaptiveLimit, p.ClientThrottle, p.Bulkhead, p.RateLimit = nil, nil, nil, nil, nil
		atkMethod(p, atkGetStock).Cache = &policy.Cache{FreshTTL: time.Minute, StaleTTL: time.Minute, MaxEntries: 10, KeyFields: []string{"sku"}}
	})
	var m *runtime.Method
	for i := 0; ; i++ {
		if m = c.Runtime().Method(i); m.Policy().Name == atkGetStock {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 8
	type finish struct {
		who int
		err error
	}
	finishes := make(chan finish, 4*(1+n))
	results := make(chan finish, 1+n)
	call := func(ctx context.Context, who int) {
		_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"},
			grpc.OnFinish(func(err error) { finishes <- finish{who, err} }))
		results <- finish{who, err}
	}
	go call(badMetadata(ctx), 0)
	g.next(t, "A's shared call")
	for i := 1; i <= n; i++ {
		go call(ctx, i)
	}
	atkWaitFor(t, "A and the 8 wait for A's shared call", func() bool { return m.CacheWaiters23j("apple") == 1+n })
	g.release <- struct{}{}
	g.next(t, "the joiners' next shared call")
	g.release <- struct{}{}
	got := map[int]error{}
	for range 1 + n {
		r := <-results
		got[r.who] = r.err
	}
	wantOwnFault(t, "caller A", got[0], `header key "x-forwarded-name"`)
	for i := 1; i <= n; i++ {
		if got[i] != nil {
			t.Errorf("caller %d: %v, want the answer of the call it shared", i, got[i])
		}
	}
	ran := map[int]int{}
	for len(finishes) > 0 {
		f := <-finishes
		ran[f.who]++
		if (f.err == nil) != (got[f.who] == nil) || f.err != nil && f.err.Error() != got[f.who].Error() {
			t.Errorf("caller %d's OnFinish got %v, its call returned %v", f.who, f.err, got[f.who])
		}
	}
	for i := 0; i <= n; i++ {
		if ran[i] != 1 {
			t.Errorf("caller %d's OnFinish ran %d times, want once", i, ran[i])
		}
	}
	if calls := srv.Calls(atkGetStock); calls != 1 {
		t.Errorf("the server saw %d calls, want 1", calls)
	}
}
