package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestRateLimitRefusesAtOnceBeyondTheBurst: with no wait allowed, the
// calls beyond the burst are refused locally with RESOURCE_EXHAUSTED
// matching ErrRateLimited, and never reach the server.
func TestRateLimitRefusesAtOnceBeyondTheBurst(t *testing.T) {
	srv, cc := start(t, server.Healthy)
	reg := prometheus.NewRegistry()
	rt := inventory(t, policy.Service{RateLimit: &policy.RateLimit{RequestsPerSecond: 1, Burst: 5}},
		runtime.WithRegisterer(reg))
	var ok, refused int
	for range 8 {
		begin := time.Now()
		_, err := callGetStock(context.Background(), rt, cc)
		switch {
		case err == nil:
			ok++
		case errors.Is(err, runtime.ErrRateLimited) && status.Code(err) == codes.ResourceExhausted:
			refused++
			if took := time.Since(begin); took > 20*time.Millisecond {
				t.Errorf("a refusal took %v: it should be at once", took)
			}
			var rerr *runtime.Error
			if !errors.As(err, &rerr) || rerr.RetryAfter <= 0 || rerr.Dependency != "example.inventory.v1.InventoryService" {
				t.Errorf("refusal %#v, want the dependency and when a token comes", rerr)
			}
		default:
			t.Fatalf("unexpected %v", err)
		}
	}
	if ok != 5 || refused != 3 {
		t.Errorf("%d answered, %d refused; want the burst of 5, then 3 refused", ok, refused)
	}
	if got := srv.Calls(getStock); got != 5 {
		t.Errorf("server saw %d calls, want 5", got)
	}
	if got := testutil.ToFloat64(counterOf(t, reg, "resilient_client_rate_limited_total")); got != 3 {
		t.Errorf("rate_limited_total %v, want 3", got)
	}
}

// TestRateLimitWaitsWithinMaxWaitAndTheDeadline: a call waits for its
// token when it comes within max_wait, and is refused at once when it would
// come after the call's deadline. A token every 250 ms (4/s), on a
// connection made beforehand: the second call ends a token's time after
// the first began, whatever the first's call cost (at 20/s, measured from
// the second's own start, a loaded machine made the first call take half
// a token's time, and the next token was nearer than the 10 ms deadline).
func TestRateLimitWaitsWithinMaxWaitAndTheDeadline(t *testing.T) {
	// A token every 500 ms: a wait of one token (~500 ms) is told from
	// one of two (~1 s) with 350 ms of slack for a loaded machine (250 ms
	// tokens with 150 ms of slack failed under -race at load 14).
	const token = 500 * time.Millisecond
	srv, cc := start(t, server.Healthy)
	readyConn(t, cc)
	rt := inventory(t, policy.Service{RateLimit: &policy.RateLimit{RequestsPerSecond: 2, Burst: 1, MaxWait: 2 * time.Second}})
	first := time.Now()
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatal(err)
	}
	if since, took := time.Since(first), time.Since(begin); since < token-5*time.Millisecond || took > token+350*time.Millisecond {
		t.Errorf("second call ended %v after the first began (took %v), want about the %v a token takes at 2/s", since, took, token)
	}
	// The next token is about 500ms away; a 200ms deadline cannot wait
	// for it, and is refused without waiting it out.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin = time.Now()
	_, err := callGetStock(ctx, rt, cc)
	if !errors.Is(err, runtime.ErrRateLimited) {
		t.Fatalf("%v, want ErrRateLimited: the token comes after the deadline", err)
	}
	if took := time.Since(begin); took > 150*time.Millisecond {
		t.Errorf("the refusal took %v, want at once", took)
	}
	// The refused call gave its token back: the next call waits no longer
	// than one token's time (two, had the refused call kept its own).
	begin = time.Now()
	if _, err := callGetStock(context.Background(), rt, cc); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > token+350*time.Millisecond {
		t.Errorf("took %v after a refusal: the refused reservation was not cancelled", took)
	}
	if got := srv.Calls(getStock); got != 3 {
		t.Errorf("server saw %d calls, want 3", got)
	}
}

// TestRateLimitOwnPerMethod: a method with a limit of its own does not
// draw from the service's.
func TestRateLimitOwnPerMethod(t *testing.T) {
	_, cc := start(t, server.Healthy)
	rt := inventory(t, policy.Service{
		RateLimit: &policy.RateLimit{RequestsPerSecond: 1, Burst: 1},
		Methods: []policy.Method{
			{Name: getStock, Idempotent: true, RateLimit: &policy.RateLimit{RequestsPerSecond: 1, Burst: 3}},
		}})
	for i := range 3 {
		if _, err := callGetStock(context.Background(), rt, cc); err != nil {
			t.Fatalf("call %d: %v, want the method's own burst of 3", i, err)
		}
	}
	if _, err := callGetStock(context.Background(), rt, cc); !errors.Is(err, runtime.ErrRateLimited) {
		t.Errorf("4th call: %v, want ErrRateLimited", err)
	}
}

// counterOf returns the single series of a counter family in reg.
func counterOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("no single series of %s", name)
	return nil
}
