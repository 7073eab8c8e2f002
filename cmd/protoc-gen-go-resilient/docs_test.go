// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// followsProto has a value of each kind whose default follows another,
// left unset: a rate limit's burst (the service's and a method's own), a
// cache's stale_ttl, an adaptive limit's bounds under the service's
// bulkhead, under a method's own, and held up by min_limit, and a retry
// budget no level sets while a method retries.
const followsProto = `syntax = "proto3";
package follows.v1;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/follows;follows";

service Follows {
  option (resilient.v1.service) = {
    timeout: {nanos: 300000000}
    bulkhead: {permits: 12}
    adaptive_limit: {tolerance: 2}
    rate_limit: {requests_per_second: 2.5}
  };
  rpc Get(Req) returns (Resp) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {
      retry: {max_attempts: 3}
      cache: {fresh_ttl: {seconds: 2}, key_fields: ["id"]}
      rate_limit: {per_method: true, requests_per_second: 7.2}
    };
  }
  rpc Narrow(Req) returns (Resp) {
    option (resilient.v1.method) = {adaptive_limit: {per_method: true, smoothing: 0.25}};
  }
  rpc Wide(Req) returns (Resp) {
    option (resilient.v1.method) = {
      bulkhead: {per_method: true, permits: 200}
      adaptive_limit: {per_method: true, min_limit: 30}
    };
  }
}
message Req { string id = 1; }
message Resp {}
`

// The policy page says what a default follows, from the rules' own record
// (rules.Followed): the key of the value it was computed from, the
// method's own where it has one and the service's where it shares it; a
// bound that held nothing is the plain default.
func TestPolicyPageSaysWhatADefaultFollows(t *testing.T) {
	files, perr := attackProto(t, "follows.proto", followsProto, "docs=true")
	if perr != "" {
		t.Fatal(perr)
	}
	page := files["follows/follows.policy.md"]
	if page == "" {
		t.Fatalf("no policy page among %v", keys(files))
	}
	for _, row := range []string{
		"| `retry_budget.ratio` | 0.1 | default: a method retries or hedges, and no annotation sets `retry_budget` |",
		"| `retry_budget.window` | 10s | default: a method retries or hedges, and no annotation sets `retry_budget` |",
		"| `bulkhead.permits` | 12 | service |",
		"| `adaptive_limit.min_limit` | 1 | default |",
		"| `adaptive_limit.max_limit` | 12 | follows `bulkhead.permits` |",
		"| `adaptive_limit.initial_limit` | 12 | follows `adaptive_limit.max_limit` |",
		"| `adaptive_limit.tolerance` | 2 | service |",
		"| `rate_limit.burst` | 3 | follows `rate_limit.requests_per_second` |",
		"| `methods.Get.rate_limit.burst` | 8 | follows `methods.Get.rate_limit.requests_per_second` |",
		"| `methods.Get.cache.stale_ttl` | 2s | follows `methods.Get.cache.fresh_ttl` |",
		"| `methods.Get.cache.max_entries` | 10000 | default |",
		// Narrow's own limit sits under the service's bulkhead.
		"| `methods.Narrow.adaptive_limit.max_limit` | 12 | follows `bulkhead.permits` |",
		"| `methods.Narrow.adaptive_limit.initial_limit` | 12 | follows `methods.Narrow.adaptive_limit.max_limit` |",
		// Wide's bulkhead is above the default maximum, which stands;
		// its min_limit holds the initial limit up.
		"| `methods.Wide.adaptive_limit.max_limit` | 100 | default |",
		"| `methods.Wide.adaptive_limit.initial_limit` | 30 | follows `methods.Wide.adaptive_limit.min_limit` |",
	} {
		if !strings.Contains(page, row+"\n") {
			t.Errorf("the page lacks the row\n%s\n%s", row, page)
		}
	}
}

// A service whose methods hedge and do not retry pays for its copies from
// its retry budget: the annotated one, in the generated literal and on
// the page (the plugin dropped it, and the runtime ran the default, while
// the page said the service had none).
func TestHedgingOnlyServiceKeepsItsBudget(t *testing.T) {
	files, perr := attackProto(t, "hedgebudget.proto", `syntax = "proto3";
package hedgebudget.v1;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/hedgebudget;hedgebudget";

service Catalog {
  option (resilient.v1.service) = {timeout: {nanos: 300000000}, retry_budget: {ratio: 0.5}};
  rpc Lookup(Req) returns (Resp) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {hedging: {delay: {nanos: 80000000}}};
  }
}
message Req {}
message Resp {}
`, "docs=true")
	if perr != "" {
		t.Fatal(perr)
	}
	page, code := files["hedgebudget/hedgebudget.policy.md"], files["hedgebudget/hedgebudget_resilient.pb.go"]
	for _, want := range []string{
		"| `retry_budget.ratio` | 0.5 | service |\n",
		"| `retry_budget.min_retries` | 10 | default |\n",
		"`/hedgebudget.v1.Catalog/Lookup`, unary. It shares the service's retry budget.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "the service has no retry budget") {
		t.Errorf("the page says the service has no budget:\n%s", page)
	}
	if !strings.Contains(code, "Ratio:") || !strings.Contains(code, "0.5") {
		t.Errorf("the generated literal has not the annotated budget:\n%s", code)
	}
}
