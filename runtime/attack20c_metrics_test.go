package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttack20cSecondClientLeavesTheAdaptiveGaugesAlone: the README says
// several clients of one dependency on one registerer share the series
// and "a client built later changes no value". The first client's
// adaptive limit has fallen and its throttler refuses; a second client of
// the same dependency built on the same registerer must leave
// resilient_client_adaptive_limit and
// resilient_client_throttle_refusal_probability as the first left them,
// not reset them to the initial limit and to 0.
func TestAttack20cSecondClientLeavesTheAdaptiveGaugesAlone(t *testing.T) {
	atkNoLeak(t)
	srv, cc := startFault(t, server.Fail(codes.ResourceExhausted))
	reg := prometheus.NewRegistry()
	edit := func(p *policy.Service) {
		p.Breaker, p.Bulkhead = nil, nil
		p.AdaptiveLimit = &policy.AdaptiveLimit{}
		p.ClientThrottle = &policy.Throttle{K: 1.1, Window: time.Minute}
		p.Methods[0].Timeout, p.Methods[0].Retry = time.Second, nil
	}
	first := adaptiveClient(t, cc, edit, runtime.WithRegisterer(reg))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for range 40 {
		first.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
	}
	limit := gaugeValue(t, reg, "resilient_client_adaptive_limit")
	refusal := gaugeValue(t, reg, "resilient_client_throttle_refusal_probability")
	if limit >= 20 || refusal <= 0 {
		t.Fatalf("after 40 RESOURCE_EXHAUSTED answers (server saw %d): adaptive limit %v, refusal probability %v; want the limit under its initial 20 and refusals", srv.Calls(atkGetStock), limit, refusal)
	}

	adaptiveClient(t, cc, edit, runtime.WithRegisterer(reg))
	if got := gaugeValue(t, reg, "resilient_client_adaptive_limit"); got != limit {
		t.Errorf("adaptive limit gauge %v after a second client was built, want the first's %v", got, limit)
	}
	if got := gaugeValue(t, reg, "resilient_client_throttle_refusal_probability"); got != refusal {
		t.Errorf("throttle refusal probability gauge %v after a second client was built, want the first's %v", got, refusal)
	}
}
