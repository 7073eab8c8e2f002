// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attack26dCeilingSrc is a service with a bulkhead of permits and an
// adaptive limit that leaves max_limit and initial_limit to their
// defaults, which follow the permits: "100, or bulkhead.permits if fewer"
// and "20, held between the bounds" (Options).
func attack26dCeilingSrc(permits int) string {
	return fmt.Sprintf(`syntax = "proto3";
package attack26d.ceiling;
import "resilient/v1/resilient.proto";
import "google/protobuf/empty.proto";
option go_package = "resilienttest/attack26d/ceiling";
service S {
  option (resilient.v1.service) = {timeout: {seconds: 2}, bulkhead: {permits: %d}, adaptive_limit: {}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
}
`, permits)
}

// TestAttack26DBulkheadOverrideMovesTheAdaptiveCeiling: "A value whose
// default follows another follows it under an override as in the .proto"
// (Overrides), and adaptive_limit.max_limit's default is "100, or
// bulkhead.permits if fewer" (Options: a default that follows another
// value). The plugin accepts the service with 8 permits and with 64;
// annotated with 16, an override of bulkhead.permits should give the
// policy the .proto with that many permits gives.
//
// Before the fix, the plugin printed the followed defaults into the literal
// (MaxLimit 16, InitialLimit 16) and the loader moves only the permits:
// lowering them to 8 is refused, blaming bulkhead.permits with a number
// nobody wrote ("16 is above the bulkhead's 8 permits … leave it unset
// for the ceiling", which an operator cannot do); raising them to 64 is
// accepted but keeps the limit's ceiling at 16 where the .proto with 64
// permits has 64 and starts at 20: on a loopback server that holds every
// call, 40 callers at once get 16 calls in flight instead of 20.
func TestAttack26DBulkheadOverrideMovesTheAdaptiveCeiling(t *testing.T) {
	annotated := todayResolve(t, attack26dCeilingSrc(16)).Policy
	if err := annotated.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, permits := range []int{8, 64} {
		asProto := todayResolve(t, attack26dCeilingSrc(permits)).Policy
		if err := asProto.Validate(); err != nil {
			t.Fatalf("the plugin's policy with %d permits: %v", permits, err)
		}
		body := fmt.Sprintf("services:\n  attack26d.ceiling.S:\n    bulkhead: {permits: %d}\n", permits)
		set, err := override.Parse("o.yaml", []byte(body), nil, &annotated)
		if err != nil {
			t.Errorf("bulkhead.permits: %d over an annotation of 16 with adaptive_limit: {} was refused, though the plugin accepts the .proto with %d permits (max_limit's default follows the permits):\n%v", permits, permits, err)
			continue
		}
		c, err := runtime.NewClient(&annotated, set.Options(&annotated)...)
		if err != nil {
			t.Fatalf("permits %d: accepted by the loader, refused by NewClient: %v", permits, err)
		}
		got, want := *c.Policy().AdaptiveLimit, *asProto.AdaptiveLimit
		if got != want {
			t.Errorf("bulkhead.permits: %d by an override: adaptive limit in force %+v, want the .proto's with %d permits %+v", permits, got, permits, want)
		}
		if permits == 64 {
			over := attack26dPeak(t, &annotated, set.Options(&annotated)...)
			proto := attack26dPeak(t, &asProto)
			t.Logf("peak in flight: %d under the override, %d under the .proto", over, proto)
			if over != proto {
				t.Errorf("40 callers at once on a server that holds each call: %d in flight under the override of permits 64, %d under the .proto with 64 permits", over, proto)
			}
		}
	}
}

// attack26dPeak builds a client of p with opts against a loopback server
// that holds each call 300 ms, sends 40 calls at once, and returns the
// most the server had in flight at once.
func attack26dPeak(t *testing.T, p *policy.Service, opts ...runtime.Option) int64 {
	t.Helper()
	var inFlight, peak atomic.Int64
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
			return err
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		select {
		case <-time.After(300 * time.Millisecond):
		case <-stream.Context().Done():
		}
		return stream.SendMsg(new(emptypb.Empty))
	}))
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c, err := runtime.NewClient(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	const method = "/attack26d.ceiling.S/Get"
	h, err := runtime.NewUnary(c, method, func(ctx context.Context, in *emptypb.Empty, opts ...grpc.CallOption) (*emptypb.Empty, error) {
		out := new(emptypb.Empty)
		return out, cc.Invoke(ctx, method, in, out, opts...)
	}, runtime.UnaryHooks[emptypb.Empty, emptypb.Empty]{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := h.Call(ctx, new(emptypb.Empty)); err != nil && !errors.Is(err, runtime.ErrConcurrencyLimited) {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Logf("%d calls failed otherwise than by the adaptive limit", n)
	}
	return peak.Load()
}
