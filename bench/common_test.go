package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The request and the response every in-process benchmark uses. The call
// returns the preallocated response, so what is measured is the policy
// around the call, not the call.
var (
	request  = &inventoryv1.GetStockRequest{Sku: "sku-1"}
	response = &inventoryv1.GetStockResponse{Sku: "sku-1", Units: 7}
)

// noop stands for a generated client method that answers at once.
func noop(context.Context, *inventoryv1.GetStockRequest, ...grpc.CallOption) (*inventoryv1.GetStockResponse, error) {
	return response, nil
}

// sink keeps results alive so the compiler cannot drop a call.
var sink *inventoryv1.GetStockResponse

const method = "/example.inventory.v1.InventoryService/GetStock"

// newClient builds a runtime client for p or fails the benchmark.
func newClient(b *testing.B, p *policy.Service) *runtime.Client {
	b.Helper()
	c, err := runtime.NewClient(p)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// newHandle builds a runtime client for p, whose one unary method is
// method, and binds that method to noop, as a generated client binds it to
// the plain client's method; it fails the benchmark when either refuses.
func newHandle(b *testing.B, p *policy.Service) *runtime.UnaryHandle[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse] {
	b.Helper()
	h, err := runtime.NewUnary(newClient(b, p), method, noop,
		runtime.UnaryHooks[inventoryv1.GetStockRequest, inventoryv1.GetStockResponse]{})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// failures counts the calls of a benchmark that failed. On a loaded
// machine an attempt can now and then outlast its timeout; that is a
// result, not a broken benchmark, so it is logged, not fatal, and the
// figures stand.
type failures struct {
	n     atomic.Int64
	first atomic.Value
}

func (f *failures) add(err error) {
	if f.n.Add(1) == 1 {
		f.first.Store(err)
	}
}

// report logs the failures, if any, at the end of a benchmark.
func (f *failures) report(b *testing.B) {
	if n := f.n.Load(); n > 0 {
		b.Logf("%d of %d calls failed; the first: %v", n, b.N, f.first.Load())
	}
}

// slidingDeadline is a caller's context that always has the same time
// left: its deadline is d from whenever it is asked. A real
// context.WithTimeout made once would expire a few milliseconds into the
// benchmark, and one made per call would add its own allocations to the
// figures; this one costs a time.Now per Deadline call and nothing else.
type slidingDeadline struct {
	context.Context
	d time.Duration
}

func (c slidingDeadline) Deadline() (time.Time, bool) { return time.Now().Add(c.d), true }

// parallel runs fn from g goroutines sharing b.N iterations between them:
// ns/op is then wall time per operation, so a figure that stays flat as g
// grows means the operations do not get in each other's way.
func parallel(b *testing.B, g int, fn func()) {
	b.Helper()
	b.ReportAllocs()
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	per, extra := b.N/g, b.N%g
	for i := range g {
		n := per
		if i < extra {
			n++
		}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			for range n {
				fn()
			}
		}()
	}
	ready.Wait()
	b.ResetTimer()
	close(start)
	done.Wait()
}
