// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// r18cDefaultsProto is a service whose method retries with the default
// max_attempts and caches by a field sku, with extra written on sku.
func r18cDefaultsProto(extra string) string {
	return `syntax = "proto3";
package resilienttest.r18cdef;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/r18cdef";
service S {
  rpc Get(Req) returns (Resp) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {
      timeout: {seconds: 1}
      retry: {}
      idempotency_key: "sku"
      cache: {fresh_ttl: {seconds: 1}, key_fields: ["sku", "n"]}
    };
  }
}
message Req {
  string sku = 1` + extra + `;
  int64 n = 2` + extra + `;
}
message Resp {}
`
}

// TestAttackR18cUserDefaultValueIgnored: the options proto says of
// (resilient.v1.default_value) "It is for the fields of this file: nothing
// reads it on others". A user writing it on the key fields of their own
// request changes nothing the plugin writes: the key and the cache key
// still read the field's own value, the generated code is byte for byte
// the code without it.
func TestAttackR18cUserDefaultValueIgnored(t *testing.T) {
	gen := func(extra string) string {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "def.proto"), []byte(r18cDefaultsProto(extra)))
		resp := runPlugin(t, compileRequest(t, "module="+testModule, []string{dir, "../../options"}, "def.proto"))
		if resp.Error != nil || len(resp.File) != 1 {
			t.Fatalf("with %q: error %q, %d files", extra, resp.GetError(), len(resp.File))
		}
		return resp.File[0].GetContent()
	}
	plain, with := gen(""), gen(` [(resilient.v1.default_value) = "7"]`)
	if plain != with {
		t.Errorf("default_value on the user's own fields changed the generated code:\n%s\nwithout it:\n%s", with, plain)
	}
	if !strings.Contains(with, "in.GetSku()") {
		t.Errorf("the key does not read the field:\n%s", with)
	}
}

// TestAttackR18cCopyDefaultsAreNotRead: the defaults in force are the
// plugin's own, compiled into it, whatever the default_value of the copy of
// resilient.proto the user's protos import says. A copy from another
// version (or edited by hand) that states max_attempts "5" still gets the
// plugin's 3, and the generated literal shows the 3 (the README's
// "Upgrading" says so and says to rewrite the copy).
func TestAttackR18cCopyDefaultsAreNotRead(t *testing.T) {
	dir := newerOptionsWith(t, [2]string{
		`optional uint32 max_attempts = 1 [(resilient.v1.default_value) = "3"];`,
		`optional uint32 max_attempts = 1 [(resilient.v1.default_value) = "5"];`,
	})
	writeFile(t, filepath.Join(dir, "def.proto"), []byte(r18cDefaultsProto("")))
	resp := runPlugin(t, compileRequest(t, "module="+testModule, []string{dir}, "def.proto"))
	if resp.Error != nil || len(resp.File) != 1 {
		t.Fatalf("error %q, %d files", resp.GetError(), len(resp.File))
	}
	got := resp.File[0].GetContent()
	if !regexp.MustCompile(`MaxAttempts:\s+3,`).MatchString(got) {
		i := strings.Index(got, "MaxAttempts")
		t.Errorf("want the plugin's default MaxAttempts 3 in the literal; got around %q", got[max(0, i-20):min(len(got), i+40)])
	}
}
