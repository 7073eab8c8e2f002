package bench

import (
	"context"
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// benchLimit is the adaptive limit of the benchmarks: the defaults, with
// a MinLimit of 2, the most attempts RunParallel has in flight on 2 cores.
// The no-op call's round trip is a few hundred nanoseconds, so a goroutine
// preempted for 10 µs looks to the gradient like a queue 50 times the
// baseline, and the limit would fall to 1 and refuse the other goroutine's
// calls: the benchmark would then measure refusals, not the bookkeeping of
// an admitted call. A real dependency's round trip (50 µs on loopback) is
// not moved by the scheduler that much.
func benchLimit() *policy.AdaptiveLimit { return &policy.AdaptiveLimit{MinLimit: 2} }

// layerPolicies are the full stack of BenchmarkStack with one adaptive
// layer more (or the breaker's count window instead of its time window),
// so that each layer's price on the happy path is the difference with
// layer=stack.
var layerPolicies = []struct {
	name string
	edit func(*policy.Service)
}{
	{"stack", func(*policy.Service) {}},
	{"stack+limit", func(p *policy.Service) { p.AdaptiveLimit = benchLimit() }},
	{"stack+throttle", func(p *policy.Service) { p.ClientThrottle = &policy.Throttle{} }},
	{"stack+limit+throttle", func(p *policy.Service) {
		p.AdaptiveLimit = benchLimit()
		p.ClientThrottle = &policy.Throttle{}
	}},
	{"stack+countwindow", func(p *policy.Service) { p.Breaker.WindowCalls = 100 }},
}

// BenchmarkLayers measures what the adaptive concurrency limit, the
// client-side throttler and the count-based breaker window each add to
// the full stack around a call that answers at once. The caller's
// deadline (a minute) is shorter than the per-attempt timeout (an hour),
// so no attempt makes a context.WithTimeout of its own: that context
// (about 400 ns, the same with or without the layers) would hide their
// few tens of nanoseconds in its noise. (The adaptive limit needs the
// timeout: Validate refuses it on a method without one.)
func BenchmarkLayers(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		for _, l := range layerPolicies {
			b.Run("mode="+mode+"/layer="+l.name, func(b *testing.B) {
				p := stackPolicy()
				p.Methods[0].Timeout = time.Hour
				l.edit(p)
				h := newHandle(b, p)
				var fail failures
				defer fail.report(b)
				b.ReportAllocs()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if mode == "serial" {
					for b.Loop() {
						resp, err := h.Call(ctx, request)
						if err != nil {
							fail.add(err)
						}
						sink = resp
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := h.Call(ctx, request); err != nil {
							fail.add(err)
						}
					}
				})
			})
		}
	}
}
