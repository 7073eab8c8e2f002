// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// underBulkhead is the limit a under a bulkhead b (nil for none), its
// ceiling: the export's view of the runtime's AdaptiveLimit.WithCeiling,
// with the initial limit held under the maximum.
func underBulkhead(a *policy.AdaptiveLimit, b *policy.Bulkhead) policy.AdaptiveLimit {
	p := *a
	if b != nil && b.Permits > 0 {
		p.MaxLimit = min(p.MaxLimit, b.Permits)
		p.InitialLimit = min(p.InitialLimit, p.MaxLimit)
	}
	return p
}

// envoyMinRTTInterval is the least min_rtt_calc_params.interval Envoy's
// adaptive concurrency filter accepts; envoyMinConcurrency is its default
// min_rtt_calc_params.min_concurrency, the limit it holds while it measures
// its baseline.
const (
	envoyMinRTTInterval = time.Millisecond
	envoyMinConcurrency = 3
)

// envoyAdaptiveFilters writes the service's adaptive layers as Envoy HTTP
// filters: the adaptive limit as the adaptive concurrency filter, the
// throttler as the admission control filter, each an HttpFilter to put in
// the http_filters of the listener whose routes lead to the service's
// cluster.
func envoyAdaptiveFilters(w func(int, string, ...any), name string, sp *policy.Service) {
	if al := sp.AdaptiveLimit; al != nil {
		p := underBulkhead(al, sp.Bulkhead)
		w(0, `- "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter`)
		w(1, "# adaptive_limit of %s. An HTTP filter judges every request through its", name)
		w(1, "# listener: put it in the http_filters of a listener whose routes go to")
		w(1, "# this cluster only, before envoy.filters.http.router.")
		w(1, "name: envoy.filters.http.adaptive_concurrency")
		w(1, "typed_config:")
		w(2, `"@type": type.googleapis.com/envoy.extensions.filters.http.adaptive_concurrency.v3.AdaptiveConcurrency`)
		w(2, "gradient_controller_config:")
		w(3, "sample_aggregate_percentile: {value: 50} # the runtime takes the mean RTT of a round; Envoy a percentile of an interval")
		w(3, "concurrency_limit_params:")
		w(4, "max_concurrency_limit: %d # max_limit%s", p.MaxLimit, ceilingNote(al, sp.Bulkhead))
		w(4, "min_concurrency_limit: %d # min_limit", p.MinLimit)
		w(4, "concurrency_update_interval: 0.1s # not expressible: the runtime moves the limit once per round trip, Envoy once per interval")
		w(3, "min_rtt_calc_params:")
		if p.BaselineWindow >= envoyMinRTTInterval {
			w(4, "interval: %s # baseline_window%s: Envoy measures its baseline again each interval, at min_concurrency", seconds(envoyMillis(p.BaselineWindow)), roundedUp(p.BaselineWindow))
		} else {
			w(4, "interval: %s # baseline_window %v is below the least interval Envoy accepts", seconds(envoyMinRTTInterval), p.BaselineWindow)
		}
		if p.MaxLimit < envoyMinConcurrency {
			// Envoy holds its limit at min_concurrency while it measures,
			// whatever max_concurrency_limit: never above max_limit.
			w(4, "min_concurrency: %d # the limit while Envoy measures its baseline: its default %d, at most max_limit", p.MaxLimit, envoyMinConcurrency)
		}
		if buffer := (p.Tolerance - 1) * 100; buffer <= 100 {
			w(4, "buffer: {value: %s} # tolerance %v: the RTT may exceed the baseline by this share", formatFloat(math.Round(buffer*1e6)/1e6), p.Tolerance)
		} else {
			w(4, "buffer: {value: 100} # tolerance %v is not expressible: Envoy's buffer is at most 100 %%, a tolerance of 2", p.Tolerance)
		}
		w(2, "concurrency_limit_exceeded_status: {code: ServiceUnavailable} # gRPC callers see UNAVAILABLE; the runtime refuses with RESOURCE_EXHAUSTED")
		w(2, "# not expressible: initial_limit %d, smoothing %v (Envoy moves the limit by its gradient at once), the", p.InitialLimit, p.Smoothing)
		w(2, "# halving on timeouts and overload refusals (Envoy reads latency only), and a method's own limit.")
	}
	if th := sp.ClientThrottle; th != nil {
		rt := "resilient." + strings.ReplaceAll(name, ".", "_") + ".admission_control"
		w(0, `- "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter`)
		w(1, "# client_throttle of %s; like the adaptive concurrency filter, it judges", name)
		w(1, "# every request through its listener.")
		w(1, "name: envoy.filters.http.admission_control")
		w(1, "typed_config:")
		w(2, `"@type": type.googleapis.com/envoy.extensions.filters.http.admission_control.v3.AdmissionControl`)
		w(2, "enabled: {default_value: true, runtime_key: %s.enabled}", rt)
		if win := envoySeconds(th.Window); win != th.Window {
			w(2, "sampling_window: %s # window %v, rounded up: Envoy reads it in whole seconds, truncated, and 0 would keep no history", seconds(win), th.Window)
		} else {
			w(2, "sampling_window: %s # window", seconds(win))
		}
		w(2, "sr_threshold: {default_value: {value: %s}, runtime_key: %s.sr_threshold} # 1 / k (k %v): Envoy refuses with probability (requests - accepts / sr_threshold) / (requests + 1)",
			formatFloat(math.Round(100/th.K*1e6)/1e6), rt, th.K)
		w(2, "aggression: {default_value: 1, runtime_key: %s.aggression} # 1: the probability as the runtime computes it", rt)
		w(2, "max_rejection_probability: {default_value: {value: %s}, runtime_key: %s.max_rejection_probability} # max_refusal %v",
			formatFloat(math.Round(th.MaxRefusal*100*1e6)/1e6), rt, th.MaxRefusal)
		w(2, "success_criteria:")
		w(3, "grpc_criteria:")
		w(4, "# accepts: every code but DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED and UNAVAILABLE")
		w(4, "grpc_success_status: [%s]", acceptCodes())
	}
}

// ceilingNote says where the export's max_concurrency_limit came from when
// the bulkhead lowered it.
func ceilingNote(al *policy.AdaptiveLimit, b *policy.Bulkhead) string {
	if b != nil && b.Permits < al.MaxLimit {
		return fmt.Sprintf(" %d under the bulkhead's %d permits", al.MaxLimit, b.Permits)
	}
	return ""
}

// acceptCodes lists the gRPC codes the adaptive layers count as accepts:
// every code but contract.OverloadCodes.
func acceptCodes() string {
	var out []string
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if !slices.Contains(contract.OverloadCodes, c) {
			out = append(out, fmt.Sprint(uint32(c)))
		}
	}
	return strings.Join(out, ", ")
}

// adaptiveLimitOf resolves an adaptive limit under the bulkhead bh (nil
// for none): the contract's defaults, and for max_limit and initial_limit
// the defaults under the bulkhead's permits, the limit's ceiling.
func adaptiveLimitOf(a *resilientv1.AdaptiveLimit, bh *resilientv1.Bulkhead) *policy.AdaptiveLimit {
	al := resolved[policy.AdaptiveLimit]("adaptive_limit", a)
	al.MinLimit, al.MaxLimit, al.InitialLimit = rules.AdaptiveLimitOf(a, bh.GetPermits())
	return al
}
