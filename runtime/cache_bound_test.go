package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// boundedGetStock builds the generated inventory client with GetStock's
// cache kept and its timeout and retries set (see getStockPolicy), the
// rate limits out; edit, if not nil, changes GetStock's policy further.
// Its connection is ready before it returns: a loaded machine's dial does
// not use up the first attempt's timeout.
func boundedGetStock(t *testing.T, srv *faultserver.Server, timeout time.Duration, attempts int, edit func(m *policy.Method)) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	cc := dialFault(t, srv.Addr())
	readyConn(t, cc)
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(func(p *policy.Service) {
			getStockPolicy(timeout, attempts)(p)
			p.RateLimit = nil
			m := &p.Methods[0]
			if m.Cache == nil {
				t.Fatalf("%s has no cache in the example's policy: the test proves nothing", m.Name)
			}
			m.RateLimit = nil
			if edit != nil {
				edit(m)
			}
		})}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// failAfter answers with code after d, or gives up when the caller does.
func failAfter(d time.Duration, code codes.Code) server.Behaviour {
	return func(ctx context.Context, _ server.Call) error {
		if err := server.Wait(ctx, d); err != nil {
			return err
		}
		return status.Error(code, "answered "+code.String()+" on purpose")
	}
}

// TestCacheSharedCallMakesEveryAnnotatedAttempt: the shared call of a
// cached, retried method is bounded as the exports bound the method
// (attempts × timeout plus the backoffs), not by one attempt's timeout. A
// dependency answers UNAVAILABLE after 100 ms, 300 ms inside the 400 ms
// timeout; the five attempts take 500 ms of answers alone, more than one
// timeout: the server sees all five, once for the three callers sharing
// the call. (With 60 ms and 200 ms, an attempt on a loaded machine reached
// its timeout, and a caller woken late could find the call gone.)
func TestCacheSharedCallMakesEveryAnnotatedAttempt(t *testing.T) {
	const attempts, answer, timeout = 5, 100 * time.Millisecond, 400 * time.Millisecond
	if attempts*answer <= timeout {
		t.Fatalf("%d answers of %v end within one %v timeout: the test proves nothing", attempts, answer, timeout)
	}
	srv, err := faultserver.Start(failAfter(answer, codes.Unavailable), runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c := boundedGetStock(t, srv, timeout, attempts, nil)

	const callers = 3
	var wg sync.WaitGroup
	errs := make([]error, callers)
	took := make([]time.Duration, callers)
	// took is from the callers' release, not from each one's call: a
	// caller woken late joins the shared call later, and its answer still
	// comes at the shared call's end.
	start := make(chan struct{})
	var released time.Time
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = getStockOf(context.Background(), c)
			took[i] = time.Since(released)
		}()
	}
	released = time.Now()
	close(start)
	wg.Wait()
	if got := srv.Calls(getStock); got != attempts {
		t.Errorf("the server saw %d attempts of the shared call, want the %d annotated (took %v, errors %v)", got, attempts, took, errs)
	}
	for i, err := range errs {
		if status.Code(err) != codes.Unavailable || !errors.Is(err, runtime.ErrRetriesExhausted) {
			t.Errorf("caller %d: %v after %v, want UNAVAILABLE matching ErrRetriesExhausted", i, err, took[i])
		}
		if took[i] < attempts*answer {
			t.Errorf("caller %d answered after %v, before %d attempts of %v could end", i, took[i], attempts, answer)
		}
	}
}

// TestCacheSharedCallEndsByItsBound: the shared call, detached from its
// callers' deadlines, still ends by its bound, 2 × 300 ms + the 5 ms
// backoff = 605 ms, against a server that hangs. The server's first answer
// asks for 400 ms of pushback, which the runtime waits (it ends inside the
// bound); the second attempt, which the server never answers, then has
// only about 205 ms of the call's time, less than its own timeout, and
// the bound cuts it: a caller with no deadline gets DEADLINE_EXCEEDED at
// 605 ms, matching ErrAttemptTimeout (the bound is made of the attempts'
// timeouts) and naming the limit, and the server sees the attempt
// cancelled.
func TestCacheSharedCallEndsByItsBound(t *testing.T) {
	srv, err := faultserver.Start(faultserver.PerCall(faultserver.Pushback(codes.Unavailable, 400*time.Millisecond), server.Hang), runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c := boundedGetStock(t, srv, 300*time.Millisecond, 2, nil)
	const limit = 605 * time.Millisecond

	took, err := getStockOf(context.Background(), c)
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, runtime.ErrAttemptTimeout) {
		t.Fatalf("%v after %v, want DEADLINE_EXCEEDED matching ErrAttemptTimeout", err, took)
	}
	if !strings.Contains(err.Error(), "cut at its limit of "+limit.String()) {
		t.Errorf("the error %q does not name the shared call's limit of %v", err, limit)
	}
	if took < limit || took > limit+400*time.Millisecond {
		t.Errorf("the shared call ended after %v, want its limit of %v", took, limit)
	}
	if got := srv.Calls(getStock); got != 2 {
		t.Errorf("the server saw %d attempts, want 2 (the pushback waited, then the attempt the bound cut)", got)
	}
	eventually(t, "the server sees the cut attempt cancelled", func() bool { return srv.Cancelled(getStock) == 1 })
}

// TestCacheSharedCallOfHedgedMethodLetsTheLastCopyAnswer: a cached hedged
// method's shared call is bounded by (copies − 1) × delay + timeout
// (1250 ms), as the exported service config bounds it, not by one copy's
// 750 ms timeout. Each copy is answered after 500 ms, the first two with
// UNAVAILABLE (non-fatal); the third, sent at 500 ms, answers OK at about
// 1000 ms: 250 ms inside its own timeout and the call's bound, 250 ms past
// one timeout. (With a 100 ms delay, 300 ms answers and a 400 ms timeout,
// at load 22 the third copy's answer came after the 600 ms bound.)
func TestCacheSharedCallOfHedgedMethodLetsTheLastCopyAnswer(t *testing.T) {
	const answer, delay, timeout = 500 * time.Millisecond, 250 * time.Millisecond, 750 * time.Millisecond
	srv, err := faultserver.Start(faultserver.PerCall(failAfter(answer, codes.Unavailable), failAfter(answer, codes.Unavailable), server.Slow(answer)),
		runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c := boundedGetStock(t, srv, timeout, 1, func(m *policy.Method) {
		m.Hedging = &policy.Hedging{Delay: delay, MaxCopies: 3, NonFatalCodes: policy.CodesOf(codes.Unavailable)}
	})

	took, err := getStockOf(context.Background(), c)
	if err != nil {
		t.Fatalf("the hedged shared call failed after %v with %v, want the third copy's answer", took, err)
	}
	if got := srv.Calls(getStock); got != 3 {
		t.Errorf("the server saw %d copies, want 3", got)
	}
	if took <= timeout {
		t.Errorf("answered after %v, within one copy's timeout: the test proves nothing", took)
	}
}

// TestCacheSharedCallOfOneAttemptIsCutByItsTimeout: a call of one attempt
// is bounded by the shorter of timeout and overall_timeout; the shared call
// cut there against a hung server is the attempt's timeout, and says so,
// as the same call without the cache does (not a plain DEADLINE_EXCEEDED,
// which is the caller's own deadline's).
func TestCacheSharedCallOfOneAttemptIsCutByItsTimeout(t *testing.T) {
	srv, err := faultserver.Start(server.Hang, runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c := boundedGetStock(t, srv, 100*time.Millisecond, 1, func(m *policy.Method) { m.OverallTimeout = 5 * time.Second })

	took, err := getStockOf(context.Background(), c)
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, runtime.ErrAttemptTimeout) || !strings.Contains(err.Error(), "per-attempt timeout of 100ms") {
		t.Fatalf("%v after %v, want DEADLINE_EXCEEDED matching ErrAttemptTimeout and naming the 100ms timeout", err, took)
	}
	if took > 600*time.Millisecond {
		t.Errorf("the shared call ended after %v, want its one attempt's 100 ms", took)
	}
	if got := srv.Calls(getStock); got != 1 {
		t.Errorf("the server saw %d attempts, want 1", got)
	}
}
