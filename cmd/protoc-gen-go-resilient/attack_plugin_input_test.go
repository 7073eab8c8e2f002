// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const hostileHead = `syntax = "proto3";
package attack.hostile;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/hostile";
message Inner { string id = 1; }
message Req { string order_id = 1; Inner inner = 2; repeated string tags = 3; map<string, string> m = 4; double d = 5; }
message Resp {}
service S {
  rpc M(Req) returns (Resp) {
    option (resilient.v1.method) = {%s};
  }
}
`

// TestAttackHostileOptionValues: values of the right shape that no policy
// can mean are refused at the option, file:line:col first, with every
// export asked for and nothing written; none panics.
func TestAttackHostileOptionValues(t *testing.T) {
	const at = "hostile.proto:10:5: attack.hostile.S.M: (resilient.v1.method)."
	for _, tc := range []struct{ opt, want string }{
		{`timeout: {seconds: 315576000000}`, at + "timeout: is not a valid duration: 315576000000 seconds is more than a Go time.Duration holds"},
		{`timeout: {seconds: -1, nanos: 5}`, at + "timeout: is not a valid duration: seconds -1 and nanos 5 must have the same sign"},
		{`timeout: {seconds: 1, nanos: 1000000000}`, at + "timeout: is not a valid duration: nanos 1000000000 must lie within ±999999999"},
		{`idempotent: true, retry: {max_backoff: {seconds: 315576000000}}`, at + "retry.max_backoff: is not a valid duration"},
		{`idempotent: true, retry: {retryable_codes: [""]}`, at + `retry.retryable_codes[0]: unknown status code ""`},
		{`idempotent: true, retry: {retryable_codes: ["UNAVAILABLE\u0000"]}`, at + `retry.retryable_codes[0]: unknown status code "UNAVAILABLE\x00"`},
		{`idempotency_key: "Order_Id", retry: {}`, at + `idempotency_key: field "Order_Id" does not exist in attack.hostile.Req (did you mean "order_id"?)`},
		{`idempotency_key: "inner.id", retry: {}`, at + `idempotency_key: field "inner.id" does not exist`},
		{`idempotency_key: "inner", retry: {}`, at + `idempotency_key: field "inner" of attack.hostile.Req is a message`},
		{`idempotency_key: "tags", retry: {}`, at + `idempotency_key: field "tags" of attack.hostile.Req is a repeated string field`},
		{`idempotency_key: "m", retry: {}`, at + `idempotency_key: field "m" of attack.hostile.Req is a map`},
		{`idempotency_key: "d", retry: {}`, at + `idempotency_key: field "d" of attack.hostile.Req is a double`},
		{`idempotency_key: "\"); panic(1); //", retry: {}`, at + `idempotency_key: field "\"); panic(1); //" does not exist`},
		{`idempotency_key: "order_id\n", retry: {}`, at + `idempotency_key: field "order_id\n" does not exist`},
		{`idempotent: true, timeout: {seconds: 1}, cache: {fresh_ttl: {seconds: 1}, key_fields: ["order_id", "order_id"]}`, at + `cache.key_fields[1]: "order_id" is listed twice`},
		{`idempotent: true, timeout: {seconds: 1}, cache: {fresh_ttl: {seconds: 1}, key_fields: [""]}`, at + `cache.key_fields[0]: field "" does not exist`},
		{`retry_budget: {ratio: 0.5}`, at + "retry_budget: retry_budget is shared by the whole dependency"},
	} {
		files, perr := attackProto(t, "hostile.proto", fmt.Sprintf(hostileHead, tc.opt), "service_config=true,envoy=true,docs=true")
		if !strings.HasPrefix(perr, tc.want) || len(files) != 0 {
			t.Errorf("%s:\ngot  %q (%d files)\nwant %q", tc.opt, perr, len(files), tc.want)
		}
	}
}

// TestAttackHostileHugeValues: values the contract allows however large
// are generated at once, and the exported bound saturates instead of
// wrapping to a short timeout.
func TestAttackHostileHugeValues(t *testing.T) {
	start := time.Now()
	files, perr := attackProto(t, "hostile.proto", fmt.Sprintf(hostileHead, `idempotent: true, timeout: {seconds: 10}, retry: {max_attempts: 4294967295}`), "service_config=true,envoy=true")
	if perr != "" {
		t.Fatal(perr)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("generating took %v", took)
	}
	sc := files["attack/hostile/hostile.service_config.json"]
	if !strings.Contains(sc, `"timeout": "9223372036.854775807s"`) {
		t.Errorf("the service config's timeout is not the saturated bound:\n%s", sc)
	}
	cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		t.Errorf("grpc-go refuses the service config: %v", err)
	} else {
		cc.Close()
	}
	if y := files["attack/hostile/hostile.envoy.yaml"]; !strings.Contains(y, "timeout: 9223372036.854775807s # 4294967295 attempts of 10s") {
		t.Errorf("the Envoy timeout is not the saturated bound:\n%s", y)
	}
}
