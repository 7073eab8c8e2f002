package example_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	rserver "github.com/go-resilient/resilient/runtime/server"
)

// TestAttack19bServersOwnDelayKeepsTheBreakerClosed: the server's own
// authentication interceptor, chained outside the Guard's as the README
// shows ("those given before ServerOptions run outside the Guard's
// (authentication)"), calls an auth backend that has become slow: 120 ms
// on every request. Callers send ample deadlines (280 ms, above
// GetStock's MinDeadline, raised to 200 ms): the tap admits each. By the
// time the Guard's interceptor checks again (begin) the server itself has
// eaten 120 ms, and it refuses with DEADLINE_EXCEEDED marked
// DEADLINE_TOO_SHORT: "the caller's time was short and the service says
// nothing of its health by it". But the caller's time was not short: the
// service is failing every request through its own slow dependency. The
// client's breaker counts each as nothing and never opens, so a truly
// failing server is pressed by every caller for ever (the breaker is what
// "stops a slow dependency taking the platform down").
//
// Fixed in runtime/server/deadline.go (checkDeadline): only the first
// check of a request (the tap's, or enter's without a tap) marks the
// refusal DEADLINE_TOO_SHORT; a later check refuses for time spent in this
// server, its own failure, judged by its code (the do-not-retry mark kept).
func TestAttack19bServersOwnDelayKeepsTheBreakerClosed(t *testing.T) {
	minDeadline := rserver.WithPolicy(inventoryName, func(p *policy.Server) {
		for i := range p.Methods {
			if p.Methods[i].Name == getStock {
				p.Methods[i].MinDeadline = 200 * time.Millisecond
			}
		}
	})
	g, err := server.NewGuard(minDeadline)
	if err != nil {
		t.Fatal(err)
	}
	var authed atomic.Int64
	slowAuth := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == getStock {
			authed.Add(1)
			time.Sleep(120 * time.Millisecond) // the auth backend, slow
		}
		return h(ctx, req)
	}
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(slowAuth), grpc.WaitForHandlers(true)}, g.ServerOptions()...)
	srv, err := server.Start("127.0.0.1:0", nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	clock := &shedClock{now: time.Unix(1e9, 0)} // the window holds every call
	plain := runtime.WithPolicy(func(p *policy.Service) {
		p.Methods[0].Retry, p.Methods[0].Cache = nil, nil
	})
	_, client := dialInventory(t, srv.Addr(), nil, runtime.WithClock(clock), plain)
	marked := 0
	for i := range 24 {
		ctx, cancel := context.WithTimeout(context.Background(), 280*time.Millisecond)
		_, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: fmt.Sprint("s", i)})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			if st, _ := client.Runtime().BreakerState(getStock); st == runtime.StateOpen {
				break
			}
			t.Fatalf("GetStock %d: %v, want DEADLINE_EXCEEDED (the server's own delay)", i, err)
		}
		if hasReason(err, runtime.DeadlineReason) {
			marked++
		}
	}
	s, _ := g.Stats(inventoryName)
	st, _ := client.Runtime().BreakerState(getStock)
	t.Logf("auth ran %d, handler ran %d, DeadlineRefused %d, marked too-short %d, breaker %v",
		authed.Load(), srv.Calls(getStock), s.DeadlineRefused, marked, st)
	if srv.Calls(getStock) != 0 || authed.Load() < 20 {
		t.Fatalf("handler ran %d, auth %d: the rig did not make the server's own delay", srv.Calls(getStock), authed.Load())
	}
	if st != runtime.StateOpen {
		t.Errorf("a server failing every request by its own slow auth (%d refusals marked DEADLINE_TOO_SHORT) left the breaker %v; want it open after its 20 minimum calls", marked, st)
	}
}

// hasReason reports whether err carries the ErrorInfo reason in the
// runtime's do-not-retry domain.
func hasReason(err error, reason string) bool {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(interface {
			GetReason() string
			GetDomain() string
		}); ok && ei.GetReason() == reason && ei.GetDomain() == runtime.DoNotRetryDomain {
			return true
		}
	}
	return false
}
