// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// TestAttack23qCodeListedTwiceRefused: a status code listed twice in a
// list of codes (retryable_codes, failure_codes, non_fatal_codes), on a
// file, a service or a method, was accepted silently; a name listed twice
// in key_fields was refused. Each repeat is now refused at its index,
// naming the file, the element, the option and the code, and nothing is
// written.
func TestAttack23qCodeListedTwiceRefused(t *testing.T) {
	const src = `syntax = "proto3";
package attack.twice;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/twice";
option (resilient.v1.file) = {circuit_breaker: {failure_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED", "UNAVAILABLE"]}};
message Req { string id = 1; }
message Resp {}
service S {
  option (resilient.v1.service) = {retry: {retryable_codes: ["RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"]}};
  rpc Get(Req) returns (Resp) {
    option (resilient.v1.method) = {idempotent: true, retry: {retryable_codes: ["UNAVAILABLE", "UNAVAILABLE"]}};
  }
  rpc Hedged(Req) returns (Resp) {
    option (resilient.v1.method) = {idempotent: true, timeout: {seconds: 1}, retry: {max_attempts: 1}, hedging: {delay: {nanos: 10000000}, non_fatal_codes: ["UNAVAILABLE", "INTERNAL", "INTERNAL", "INTERNAL"]}};
  }
}
`
	files, perr := attackProto(t, "twice.proto", src, "service_config=true,envoy=true,docs=true")
	if len(files) != 0 {
		t.Errorf("wrote %v despite the refusal", keys(files))
	}
	want := []string{
		`twice.proto:5:1: attack.twice: (resilient.v1.file).circuit_breaker.failure_codes[2]: "UNAVAILABLE" is listed twice: remove the repeat`,
		`twice.proto:9:3: attack.twice.S: (resilient.v1.service).retry.retryable_codes[1]: "RESOURCE_EXHAUSTED" is listed twice: remove the repeat`,
		`twice.proto:11:5: attack.twice.S.Get: (resilient.v1.method).retry.retryable_codes[1]: "UNAVAILABLE" is listed twice: remove the repeat`,
		`twice.proto:14:5: attack.twice.S.Hedged: (resilient.v1.method).hedging.non_fatal_codes[2]: "INTERNAL" is listed twice: remove the repeat`,
		`twice.proto:14:5: attack.twice.S.Hedged: (resilient.v1.method).hedging.non_fatal_codes[3]: "INTERNAL" is listed twice: remove the repeat`,
	}
	for _, w := range want {
		if !strings.Contains(perr, w) {
			t.Errorf("missing %q in\n%s", w, perr)
		}
	}
	if n := strings.Count(perr, "listed twice"); n != len(want) {
		t.Errorf("%d repeats refused, want %d:\n%s", n, len(want), perr)
	}

	// The same lists without a repeat generate.
	fixed := strings.NewReplacer(`, "UNAVAILABLE"]}};`, `]}};`, `"RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"`, `"RESOURCE_EXHAUSTED"`,
		`["UNAVAILABLE", "UNAVAILABLE"]`, `["UNAVAILABLE"]`, `"INTERNAL", "INTERNAL", "INTERNAL"`, `"INTERNAL"`).Replace(src)
	if files, perr := attackProto(t, "twice.proto", fixed, ""); perr != "" || len(files) != 1 {
		t.Errorf("without the repeats: %d files, error %q", len(files), perr)
	}
}
