package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestCallAgainstAHungServerEndsAtItsBound: the bound the exports write
// for a method (bound.Call) is the time the generated client really lets
// a call of it run, neither less (beyond the backoffs' jitter) nor more
// (beyond scheduling). Against a server that never answers, GetStock, with
// and without its cache, ends at bound.Call, after the attempts the policy
// makes. A retry of max_attempts 1 (an override's way to turn
// retries off) is one attempt, cut by its timeout as with no retry, not
// by the overall_timeout around it.
func TestCallAgainstAHungServerEndsAtItsBound(t *testing.T) {
	const ms = time.Millisecond
	once := func() *policy.Retry { return retryPolicy(1) }
	for _, tc := range []struct {
		name              string
		timeout, overall  time.Duration
		retry             func() *policy.Retry
		attempts          int
		wantBound, jitter time.Duration // jitter: how much sooner the backoffs may end it
	}{
		{"no retry, overall longer", 100 * ms, 2 * time.Second, nil, 1, 100 * ms, 0},
		{"retry of one attempt, overall longer", 100 * ms, 2 * time.Second, once, 1, 100 * ms, 0},
		{"retry of one attempt, overall the same", 100 * ms, 100 * ms, once, 1, 100 * ms, 0},
		{"retry of one attempt, overall only", 0, 150 * ms, once, 1, 150 * ms, 0},
		{"retry of one attempt, no overall", 100 * ms, 0, once, 1, 100 * ms, 0},
		// The control: three attempts of 150 ms cut by their own
		// timeouts, with waits below 1 ms and 2 ms between them (of 60 ms,
		// at load 20 only the first reached the server in time).
		{"retried", 150 * ms, 0, func() *policy.Retry {
			r := retryPolicy(3)
			r.InitialBackoff, r.MaxBackoff = ms, 2*ms
			r.RetryableCodes = policy.CodesOf(codes.DeadlineExceeded)
			return r
		}, 3, 453 * ms, 3 * ms},
	} {
		for _, cached := range []bool{false, true} {
			name := tc.name
			if cached {
				name += ", cached"
			}
			t.Run(name, func(t *testing.T) {
				srv, cc := startFault(t, server.Hang)
				readyConn(t, cc) // each attempt reaches the server in its time
				var limit time.Duration
				edit := func(p *policy.Service) {
					getStockPolicy(tc.timeout, 1)(p)
					p.RateLimit = nil
					m := &p.Methods[0]
					m.OverallTimeout, m.RateLimit = tc.overall, nil
					if tc.retry != nil {
						m.Retry = tc.retry()
					}
					if !cached {
						m.Cache = nil
					} else if m.Cache == nil {
						t.Fatalf("%s has no cache in the example's policy: the test proves nothing", m.Name)
					}
					limit = bound.Call(m)
				}
				c := boundedClient(t, cc, edit)
				took, err := getStockOf(context.Background(), c)
				if status.Code(err) != codes.DeadlineExceeded {
					t.Fatalf("%v after %v, want DEADLINE_EXCEEDED", err, took)
				}
				// Cut by an attempt's own timeout, it says so, cached or
				// not; cut by the overall_timeout (one as short as the timeout
				// leaves the attempt no context of its own), it does not.
				if own := tc.timeout > 0 && (tc.overall == 0 || tc.timeout < tc.overall); errors.Is(err, runtime.ErrAttemptTimeout) != own {
					t.Errorf("%v: matches ErrAttemptTimeout %v, want %v", err, !own, own)
				}
				within(t, "the call (bound.Call "+limit.String()+")", took, limit-tc.jitter, limit+300*ms)
				if limit != tc.wantBound {
					t.Errorf("bound.Call = %v, want %v", limit, tc.wantBound)
				}
				if got := srv.Calls(getStock); got != tc.attempts {
					t.Errorf("the server saw %d attempts, want %d", got, tc.attempts)
				}
			})
		}
	}
}

// boundedClient builds the generated inventory client over cc with the
// annotated policy edited by edit only (its cache kept unless edit drops it).
func boundedClient(t *testing.T, cc grpc.ClientConnInterface, edit func(p *policy.Service)) *inventoryv1.InventoryServiceResilientClient {
	t.Helper()
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithPolicy(edit)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
