package runtime_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18bPanicking is an interceptor that panics with "r18b: the shared call
// panicked" once the invoker returned, while armed.
func r18bPanicking(armed *atomic.Bool) grpc.DialOption {
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if armed.Load() {
			panic("r18b: the shared call panicked")
		}
		return err
	})
}

// TestAttackR18BSharedCallPanicReachesEveryWaiter: a panic in a cache's
// shared call (an interceptor, a codec) reaches each caller waiting for
// it, as if each had made the call, and the next caller starts afresh.
func TestAttackR18BSharedCallPanicReachesEveryWaiter(t *testing.T) {
	atkNoLeak(t)
	var armed atomic.Bool
	armed.Store(true)
	srv, cc := startFault(t, server.Slow(60*time.Millisecond), r18bPanicking(&armed))
	c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}, inventoryv1.InventoryServiceResilientOptions{})
	var wg sync.WaitGroup
	var panicked atomic.Int32
	for range 3 {
		wg.Go(func() {
			if p := r18Panicked(func() { _, _ = r18bGet(c, "apple") }); p == "r18b: the shared call panicked" {
				panicked.Add(1)
			}
		})
	}
	wg.Wait()
	if got := srv.Calls(atkGetStock); got != 1 {
		t.Errorf("server saw %d calls for 3 callers of one key, want 1 shared", got)
	}
	if panicked.Load() != 3 {
		t.Errorf("%d of 3 waiters saw the shared call's panic", panicked.Load())
	}
	armed.Store(false)
	if resp, err := r18bGet(c, "apple"); err != nil || resp.GetUnits() != 42 {
		t.Errorf("after the panic: %v %v, want a new call's answer", resp, err)
	}
}

// TestAttackR18BAbandonedSharedCallPanicIsNotSwallowed: the shared call
// of a key whose only caller gave up runs on (its attempt is on the
// wire), and then panics. Nobody waits for it: as a hedged loser's, the
// panic goes on on its own goroutine and ends the program (README,
// "Failures and answers": a panic is never swallowed). The program is a
// child process of this test.
func TestAttackR18BAbandonedSharedCallPanicIsNotSwallowed(t *testing.T) {
	if os.Getenv("R18B_CHILD") == "abandoned" {
		var armed atomic.Bool
		armed.Store(true)
		srv, err := faultserver.Start(server.Slow(100*time.Millisecond), runtime.ServerOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		cc := dialFault(t, srv.Addr(), r18bPanicking(&armed))
		c := r18bCached(t, cc, policy.Cache{FreshTTL: time.Hour, StaleTTL: time.Hour, MaxEntries: 10}, inventoryv1.InventoryServiceResilientOptions{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		time.Sleep(time.Second) // the attempt ends at 100ms, and panics
		os.Stdout.WriteString("R18B: swallowed\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackR18BAbandonedSharedCallPanicIsNotSwallowed$")
	cmd.Env = append(os.Environ(), "R18B_CHILD=abandoned")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "r18b: the shared call panicked") {
		t.Errorf("the abandoned shared call's panic was swallowed (exit %v):\n%s", err, out)
	}
}
