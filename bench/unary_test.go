package bench

import (
	"context"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// BenchmarkUnary shows what a unary call through the runtime costs with no policy at all (the
// floor), and that a per-attempt timeout makes no context when the caller's
// deadline is already shorter: policy=timeout1s/caller=deadline100ms
// should cost what policy=none does, where caller=none and
// caller=deadline10s pay for a context.WithTimeout.
func BenchmarkUnary(b *testing.B) {
	cases := []struct {
		name    string
		timeout time.Duration
		ctx     context.Context
	}{
		{"policy=none/caller=none", 0, context.Background()},
		{"policy=timeout1s/caller=none", time.Second, context.Background()},
		{"policy=timeout1s/caller=deadline100ms", time.Second, slidingDeadline{context.Background(), 100 * time.Millisecond}},
		{"policy=timeout1s/caller=deadline10s", time.Second, slidingDeadline{context.Background(), 10 * time.Second}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			h := newHandle(b, &policy.Service{
				Name:    "example.inventory.v1.InventoryService",
				Methods: []policy.Method{{Name: method, Timeout: c.timeout}},
			})
			ctx := c.ctx
			b.ReportAllocs()
			for b.Loop() {
				resp, err := h.Call(ctx, request)
				if err != nil {
					b.Fatal(err)
				}
				sink = resp
			}
		})
	}
}
