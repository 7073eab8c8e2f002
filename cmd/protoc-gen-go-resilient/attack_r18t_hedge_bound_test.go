// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// r18tHedgeFile is the service config the plugin writes for r18tHedgeSrc.
const r18tHedgeFile = "hedgebound/hedgebound.service_config.json"

// r18tHedgeSrc is a service whose one method is hedged: each copy may run
// 450 ms, a copy is sent every 100 ms without an answer, three in all.
const r18tHedgeSrc = `syntax = "proto3";
package resilienttest.hedgebound;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/hedgebound";
service Quotes {
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {
      timeout: {nanos: 450000000}
      hedging: {delay: {nanos: 100000000} max_copies: 3}
    };
  }
}
`

// TestAttackR18tHedgedCallBound measures, on a loopback server, how long
// the generated client lets a hedged call run, and checks that the service
// config's timeout (README: "the longest the policy lets a call run") is
// not shorter: a gRPC client that hedges by the exported hedgingPolicy
// would otherwise cut the later copies the Go client lets answer. The
// server answers each call after 300 ms, the first two with UNAVAILABLE
// (non-fatal), the third with OK: the Go client's third copy, sent at
// 200 ms (before the first copy fails), answers at about 500 ms, inside
// its own 450 ms. (With 300 ms copies answering after 220 ms, at load 10
// the third copy's 80 ms of slack was not enough.)
func TestAttackR18tHedgedCallBound(t *testing.T) {
	files, perr := attackProto(t, "hedgebound.proto", r18tHedgeSrc, "service_config=true")
	if perr != "" {
		t.Fatalf("plugin: %s", perr)
	}
	sc := parseServiceConfig(t, files[r18tHedgeFile])
	mc, ok := sc["resilienttest.hedgebound.Quotes/Get"]
	if !ok || mc.HedgingPolicy == nil || mc.HedgingPolicy.MaxAttempts != 3 {
		t.Fatalf("want Get hedged with 3 attempts in the service config, got %+v in:\n%s", mc, files[r18tHedgeFile])
	}
	exported, err := time.ParseDuration(mc.Timeout)
	if err != nil {
		t.Fatalf("Get's timeout %q: %v", mc.Timeout, err)
	}

	var mu sync.Mutex
	calls := 0
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
			return err
		}
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		select {
		case <-time.After(300 * time.Millisecond):
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
		if n < 3 {
			return status.Error(codes.Unavailable, "copy refused on purpose")
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
	// Connected first: the copies' timing is the point, not the dial's.
	ready, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ready, s) {
			t.Fatalf("the connection to the loopback server is %v after 10s", s)
		}
	}

	sp := todayResolve(t, r18tHedgeSrc)
	c, err := runtime.NewClient(&sp.Policy)
	if err != nil {
		t.Fatal(err)
	}
	const method = "/resilienttest.hedgebound.Quotes/Get"
	h, err := runtime.NewUnary(c, method, func(ctx context.Context, in *emptypb.Empty, opts ...grpc.CallOption) (*emptypb.Empty, error) {
		out := new(emptypb.Empty)
		return out, cc.Invoke(ctx, method, in, out, opts...)
	}, runtime.UnaryHooks[emptypb.Empty, emptypb.Empty]{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = h.Call(context.Background(), new(emptypb.Empty))
	took := time.Since(start)
	mu.Lock()
	seen := calls
	mu.Unlock()
	if err != nil || seen != 3 {
		t.Fatalf("the hedged call: err %v after %d calls seen by the server, want its third copy's answer", err, seen)
	}
	if took <= 450*time.Millisecond {
		t.Fatalf("the hedged call answered in %v, not after one copy's 450 ms: the test proves nothing", took)
	}
	if exported < took {
		t.Errorf("the service config bounds Get at %v, but the generated client answered it after %v (the third copy, sent at 2 × delay, may run its own timeout): a hedging gRPC client loading the file would cut it", exported, took)
	}
	if want := 2*100*time.Millisecond + 450*time.Millisecond; exported != want {
		t.Errorf("Get's exported timeout is %v, want (max_copies-1) × delay + timeout = %v", exported, want)
	}
}

// TestAttackR18tHedgedBoundEdges: the exported bound of a hedged call
// counts the copies gRPC sends (at most 5, whatever max_copies says),
// gives way to overall_timeout, is 0 without a timeout, and saturates
// instead of wrapping for a delay as long as a policy can say.
func TestAttackR18tHedgedBoundEdges(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		mp   policy.Method
		want time.Duration
	}{
		{"three copies", policy.Method{Timeout: 300 * ms, Hedging: &policy.Hedging{Delay: 100 * ms, MaxCopies: 3}}, 500 * ms},
		{"eight copies, gRPC sends five", policy.Method{Timeout: 300 * ms, Hedging: &policy.Hedging{Delay: 50 * ms, MaxCopies: 8}}, 500 * ms},
		{"overall_timeout", policy.Method{Timeout: 300 * ms, OverallTimeout: 350 * ms, Hedging: &policy.Hedging{Delay: 100 * ms, MaxCopies: 3}}, 350 * ms},
		{"no timeout", policy.Method{Hedging: &policy.Hedging{Delay: 100 * ms, MaxCopies: 3}}, 0},
		{"longest delay", policy.Method{Timeout: time.Duration(math.MaxInt64), Hedging: &policy.Hedging{Delay: time.Duration(math.MaxInt64), MaxCopies: 5}}, time.Duration(math.MaxInt64)},
	} {
		if got := hedgedBound(&tc.mp); got != tc.want {
			t.Errorf("%s: hedgedBound = %v, want %v", tc.name, got, tc.want)
		}
	}
}
