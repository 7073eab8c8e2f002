// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// r18tOnceSrc retries every method of its service three times, and turns
// the retries off for Once the way the refusals advise
// (retry.max_attempts: 1).
const r18tOnceSrc = `syntax = "proto3";
package resilienttest.once;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/once";
service Lookups {
  option (resilient.v1.service) = {
    retry: {max_attempts: 3 initial_backoff: {nanos: 1000000} max_backoff: {nanos: 2000000}}
  };
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
  rpc Once(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {max_attempts: 1}};
  }
}
`

// TestAttackR18tOneAttemptServiceConfigLoads loads the service config of
// a service whose one method turns its retries off with max_attempts: 1
// into a plain grpc-go channel. gRFC A6 requires a retryPolicy's
// maxAttempts to be 2 or more, and grpc-go refuses the whole config
// otherwise: a file with "maxAttempts": 1 would leave every method of
// every service in it without its timeout and retries. The channel must
// be built, Get must be tried 3 times on UNAVAILABLE, and Once once, as
// the generated client does.
func TestAttackR18tOneAttemptServiceConfigLoads(t *testing.T) {
	files, perr := attackProto(t, "once.proto", r18tOnceSrc, "service_config=true")
	if perr != "" {
		t.Fatalf("plugin: %s", perr)
	}
	sc := files["once/once.service_config.json"]
	if mc, ok := parseServiceConfig(t, sc)["resilienttest.once.Lookups/Once"]; ok && mc.RetryPolicy != nil && mc.RetryPolicy.MaxAttempts < 2 {
		t.Errorf("Once has a retryPolicy of maxAttempts %d, which gRFC A6 forbids (2 or more), in:\n%s", mc.RetryPolicy.MaxAttempts, sc)
	}
	cs, addr := startCountingServer(t)
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		t.Fatalf("grpc-go refuses the exported service config: %v\n%s", err, sc)
	}
	defer cc.Close()
	cs.set(codes.Unavailable, 0)
	for _, tc := range []struct {
		method string
		want   int
	}{{"Get", 3}, {"Once", 1}} {
		full := "/resilienttest.once.Lookups/" + tc.method
		err := cc.Invoke(context.Background(), full, new(emptypb.Empty), new(emptypb.Empty))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want UNAVAILABLE", tc.method, err)
		}
		if got := cs.count(full); got != tc.want {
			t.Errorf("%s: the server saw %d attempts, want %d", tc.method, got, tc.want)
		}
	}
	if strings.Contains(sc, `"maxAttempts": 1,`) {
		t.Errorf("the file still holds a maxAttempts of 1:\n%s", sc)
	}
}
