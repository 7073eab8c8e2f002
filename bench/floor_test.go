package bench

import (
	"context"
	"slices"
	"testing"
	"time"
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
	const floorBatch = 200
	calls := make([]func(context.Context) error, len(stackImpls))
	for i, impl := range stackImpls {
		c := stackCall(b, impl)
		calls[i] = func(ctx context.Context) error { _, err := c(ctx); return err }
	}
	per := make([][]float64, len(stackImpls))
	ctx := context.Background()
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
		b.ReportMetric(p10[i], stackImpls[i]+"-p10-ns/call")
	}
	b.ReportMetric(p10[0]-p10[2], "over-context-ns/call")
}
