package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-resilient/resilient/runtime/policy"
)

// BenchmarkFullBulkheadRefusal measures what a call refused by a full
// bulkhead costs when the permits are held by open streams whose contexts
// are all alive: the refusal's reap looks for an ended one among them
// (serial: the search's own cost; parallel: a storm of refusals).
func BenchmarkFullBulkheadRefusal(b *testing.B) {
	for _, n := range []int{0, 10, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			bh := newBulkhead(policy.Bulkhead{Permits: max(n, 1)})
			for range max(n, 1) {
				bh.tryAcquire()
			}
			for range n {
				ctx, cancel := context.WithCancel(b.Context())
				defer cancel()
				context.AfterFunc(ctx, func() {}) // as a stream's: its Done is made
				bh.streams.add(&stream{ctx: ctx})
			}
			b.ReportAllocs()
			b.Run("serial", func(b *testing.B) {
				for b.Loop() {
					if bh.tryAcquire() || bh.streams.reap() {
						b.Fatal("a permit of a full bulkhead")
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if bh.tryAcquire() || bh.streams.reap() {
							b.Fatal("a permit of a full bulkhead")
						}
					}
				})
			})
		})
	}
}
