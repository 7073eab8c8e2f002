package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// BenchmarkStackFloor runs the stacks of BenchmarkStack (serial) in turns,
// in batches of floorBatch calls, and reports for each the tenth
// percentile of its batches' time per call, in p10-ns/call, and the
// resilient stack's lead over the bare context.WithTimeout in
// over-context-ns/call. On a shared machine the neighbours' load comes and
// goes within a run; the quickest tenth of the batches is what the code
// costs when it has a core to itself, and taking turns keeps the three
// stacks' batches under the same load. sec/op is the time of one turn of
// all three, not of a call: read the custom units.
func BenchmarkStackFloor(b *testing.B) {
	calls := make([]func(context.Context) error, len(stackImpls))
	for i, impl := range stackImpls {
		c := stackCall(b, impl)
		calls[i] = func(ctx context.Context) error { _, err := c(ctx); return err }
	}
	p10 := floorTurns(b, context.Background(), calls)
	for i := range p10 {
		b.ReportMetric(p10[i], stackImpls[i]+"-p10-ns/call")
	}
	b.ReportMetric(p10[0]-p10[2], "over-context-ns/call")
}

// BenchmarkStackFloorDeadline is BenchmarkStackFloor under a caller that
// set a deadline, as a server's handler or an HTTP request's does: a
// context.WithTimeout of a day, made once. Each stack's per-attempt
// context is then the child of a context that can end, and the runtime
// reads the caller's deadline at the call's start.
func BenchmarkStackFloorDeadline(b *testing.B) {
	calls := make([]func(context.Context) error, len(stackImpls))
	for i, impl := range stackImpls {
		c := stackCall(b, impl)
		calls[i] = func(ctx context.Context) error { _, err := c(ctx); return err }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
	defer cancel()
	p10 := floorTurns(b, ctx, calls)
	for i := range p10 {
		b.ReportMetric(p10[i], stackImpls[i]+"-p10-ns/call")
	}
	b.ReportMetric(p10[0]-p10[2], "over-context-ns/call")
}

// floorTurns runs calls in turns, in batches of floorBatch calls, for the
// benchmark's loop, and returns for each the tenth percentile of its
// batches' time per call, in nanoseconds, each call made with ctx.
func floorTurns(b *testing.B, ctx context.Context, calls []func(context.Context) error) []float64 {
	const floorBatch = 200
	per := make([][]float64, len(calls))
	var fail failures
	defer fail.report(b)
	for b.Loop() {
		for i, call := range calls {
			start := time.Now()
			for range floorBatch {
				if err := call(ctx); err != nil {
					fail.add(err)
				}
			}
			per[i] = append(per[i], float64(time.Since(start).Nanoseconds())/floorBatch)
		}
	}
	p10 := make([]float64, len(per))
	for i, v := range per {
		slices.Sort(v)
		p10[i] = v[len(v)/10]
	}
	return p10
}

// layerStacks are the stacks BenchmarkStackParts takes in turns: the bare
// context.WithTimeout, then the runtime with the 1 s attempt timeout alone,
// and with one layer of the full stack added at a time, up to the full
// stack of BenchmarkStack. Each part's cost is the difference between two
// neighbours' figures.
var layerStacks = []struct {
	name   string
	policy func() *policy.Service
}{
	{"context", nil},
	{"timeout", func() *policy.Service {
		p := stackPolicy()
		p.Budget, p.Breaker, p.Bulkhead, p.Methods[0].Retry = nil, nil, nil, nil
		return p
	}},
	{"+bulkhead", func() *policy.Service {
		p := stackPolicy()
		p.Budget, p.Breaker, p.Methods[0].Retry = nil, nil, nil
		return p
	}},
	{"+retry", func() *policy.Service { // with the budget
		p := stackPolicy()
		p.Breaker = nil
		return p
	}},
	{"+breaker", stackPolicy}, // the full stack
}

// BenchmarkStackParts is BenchmarkStackFloor over layerStacks: the
// quickest tenth of each stack's batches, in p10-ns/call, taken in turns.
func BenchmarkStackParts(b *testing.B) {
	calls := make([]func(context.Context) error, len(layerStacks))
	for i, s := range layerStacks {
		if s.policy == nil {
			c := stackCall(b, "context")
			calls[i] = func(ctx context.Context) error { _, err := c(ctx); return err }
			continue
		}
		h := newHandle(b, s.policy())
		calls[i] = func(ctx context.Context) error { _, err := h.Call(ctx, request); return err }
	}
	for i, p10 := range floorTurns(b, context.Background(), calls) {
		b.ReportMetric(p10, layerStacks[i].name+"-p10-ns/call")
	}
}

// BenchmarkStackLayer runs each stack of layerStacks alone, in a plain
// loop: what an instruction count (callgrind) of one stack runs, where
// StackParts, which takes them in turns, is for the time.
func BenchmarkStackLayer(b *testing.B) {
	for _, s := range layerStacks {
		b.Run(s.name, func(b *testing.B) {
			var call func(context.Context) error
			if s.policy == nil {
				c := stackCall(b, "context")
				call = func(ctx context.Context) error { _, err := c(ctx); return err }
			} else {
				h := newHandle(b, s.policy())
				call = func(ctx context.Context) error { _, err := h.Call(ctx, request); return err }
			}
			ctx := context.Background()
			var fail failures
			defer fail.report(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := call(ctx); err != nil {
					fail.add(err)
				}
			}
		})
	}
}
