// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"

	"github.com/go-resilient/resilient/runtime"
)

// a27hDescribed reads Client.Describe's text back into its values by the
// keys of the policy page: "retry_budget.ratio", "methods.Get.timeout",
// "methods.Get.retry" for a retry described as none. A group a method
// shares, or neither has nor goes through, is not its own and has no key;
// the cache's key fields are not a setting.
func a27hDescribed(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	method := ""
	put := func(prefix, group, rest string) {
		if rest == "none" {
			out[prefix+group] = "none"
			return
		}
		if strings.HasPrefix(rest, "none (max_attempts ") {
			out[prefix+group+".max_attempts"] = strings.TrimSuffix(strings.TrimPrefix(rest, "none (max_attempts "), ")")
			return
		}
		rest, _, _ = strings.Cut(rest, ", key_fields [")
		for _, pair := range strings.Split(rest, ", ") {
			k, v, ok := strings.Cut(pair, " ")
			if !ok {
				t.Fatalf("Describe: %q in %q is no pair", pair, rest)
			}
			out[prefix+group+"."+k] = strings.TrimSuffix(v, " (ignored: window_calls is set)")
		}
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for _, line := range lines[1:] {
		switch {
		case line == "  every value as annotated":
		case strings.HasPrefix(line, "  /"):
			method = line[strings.LastIndex(line, "/")+1:]
		case strings.HasPrefix(line, "    ") && method != "" && !strings.Contains(strings.SplitN(line, ",", 2)[0], ":"):
			// The method's kind and scalars.
			fields := strings.Split(strings.TrimSpace(line), ", ")
			for _, f := range fields[1:] {
				k, v, _ := strings.Cut(f, ": ")
				out["methods."+method+"."+k] = v
			}
		case strings.HasPrefix(line, "    ") && method != "":
			g, rest, _ := strings.Cut(strings.TrimSpace(line), ": ")
			if rest == "shared" || rest == "none" && g != "retry" {
				// A group of the service the method neither has nor goes
				// through has no row (README: Policy documentation).
				continue
			}
			g, _, _ = strings.Cut(g, " (")
			put("methods."+method+".", g, rest)
		case strings.HasPrefix(line, "  ") && method == "":
			g, rest, _ := strings.Cut(strings.TrimSpace(line), ": ")
			g, _, _ = strings.Cut(g, " (")
			if !strings.Contains(rest, " ") && rest != "none" {
				out[g] = rest
				continue
			}
			put("", g, rest)
		default:
			t.Fatalf("Describe: line %q not understood in:\n%s", line, text)
		}
	}
	return out
}

// a27hPageValues reads the rows of one service's section of the policy
// page, its client side only (the server side's shedding and server.*
// are not the client's to describe), values written as Describe writes
// them: codes without commas, a priority by its short name.
func a27hPageValues(page, service string) map[string]string {
	out := map[string]string{}
	start := strings.Index(page, "\n## "+service+"\n")
	if start < 0 {
		return nil
	}
	sec := page[start+1:]
	if end := strings.Index(sec[3:], "\n## "); end >= 0 {
		sec = sec[:end+3]
	}
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		key := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		if strings.HasPrefix(key, "shedding.") || strings.Contains(key, ".server.") {
			continue
		}
		v := strings.TrimSuffix(cells[1], " (ignored: `window_calls` is set)")
		if strings.HasPrefix(v, "[") {
			v = strings.ReplaceAll(v, ", ", " ")
		}
		if p, ok := strings.CutPrefix(v, "PRIORITY_"); ok && strings.HasSuffix(key, ".priority") {
			v = strings.ToLower(p)
		}
		out[key] = v
	}
	return out
}

// a27hDocsSrc: every group a client has, shared and a method's own, with
// the defaults that follow other values (a burst, a stale_ttl, an
// adaptive limit capped by a method's own bulkhead), retries on
// DEADLINE_EXCEEDED alone, keys named and generated, hedging, a retry
// turned off with max_attempts 1, streams, and a service without any
// annotation beside one with a budget.
const a27hDocsSrc = `syntax = "proto3";
package resilienttest.a27hd;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a27hd";
option (resilient.v1.file) = {timeout: {nanos: 300000000}};
message Req { string k = 1; string sku = 2; }
service Shop {
  option (resilient.v1.service) = {
    retry: {max_attempts: 4, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}
    adaptive_limit: {tolerance: 2}
    client_throttle: {k: 1.5}
    bulkhead: {permits: 6, max_wait: {nanos: 5000000}}
    rate_limit: {requests_per_second: 7.5}
    circuit_breaker: {window_calls: 40, slow_call_threshold: {nanos: 250000000}}
  };
  rpc Get(Req) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {retryable_codes: ["DEADLINE_EXCEEDED"]}, cache: {fresh_ttl: {seconds: 2}, key_fields: ["sku"]}, priority: PRIORITY_LOW};
  }
  rpc Own(Req) returns (google.protobuf.Empty) {
    option idempotency_level = IDEMPOTENT;
    option (resilient.v1.method) = {overall_timeout: {seconds: 1}, bulkhead: {per_method: true, permits: 3}, adaptive_limit: {per_method: true}, circuit_breaker: {per_method: true, minimum_calls: 5}, rate_limit: {per_method: true, requests_per_second: 0.5}};
  }
  rpc Put(Req) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {idempotency_key: "k", priority: PRIORITY_CRITICAL};
  }
  rpc Pay(Req) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {generate_idempotency_key: true, retry: {max_attempts: 2}};
  }
  rpc Once(Req) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {retry: {max_attempts: 1}};
  }
  rpc H(Req) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {max_attempts: 1}, hedging: {delay: {nanos: 10000000}, max_copies: 7, non_fatal_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc Watch(Req) returns (stream google.protobuf.Empty) {
    option (resilient.v1.method) = {bulkhead: {per_method: true, permits: 2}};
  }
  rpc Chat(stream Req) returns (stream google.protobuf.Empty) {}
}
service Bare {
  rpc Ping(google.protobuf.Empty) returns (google.protobuf.Empty) {}
}
`

// TestAttack27HDocsSayWhatDescribeSays: README (Policy documentation):
// the page holds "every value the generated code holds", each row one
// entry of policy.Service.Settings(), "the lists the audit trail and the
// override loader read too"; Client.Describe prints the policy in force
// from the same list. For the services of a file written for it and of
// the repository's own test and example protos, every value Describe
// prints of a client built from the generated policy is on the page under
// its key, with the same value, and the page has no client value Describe
// does not print.
func TestAttack27HDocsSayWhatDescribeSays(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a27hd.proto"), []byte(a27hDocsSrc))
	const example = "github.com/go-resilient/resilient"
	type input struct{ module, dir, file string }
	ins := []input{{testModule, dir, "a27hd.proto"}, {testModule, "testdata", "export/export.proto"}, {testModule, "testdata", "export/attack_mixed.proto"}}
	gens, err := filepath.Glob("testdata/gen/*.proto")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens {
		ins = append(ins, input{testModule, "testdata", "gen/" + filepath.Base(g)})
	}
	ins = append(ins, input{example, "../../example/proto", "example/inventory/v1/inventory.proto"}, input{example, "../../example/proto", "example/payments/v1/payments.proto"})
	checked, values := 0, 0
	defer func() {
		t.Logf("%d services, %d values compared", checked, values)
		if checked < 20 || values < 500 {
			t.Errorf("compared %d services and %d values only", checked, values)
		}
	}()
	for _, in := range ins {
		req := compileRequest(t, "module="+in.module+",docs=true", []string{in.dir, "../../options"}, in.file)
		resp := runPluginParams(t, req)
		if resp.Error != nil {
			t.Fatalf("%s: %s", in.file, resp.GetError())
		}
		page := ""
		for _, f := range resp.File {
			if strings.HasSuffix(f.GetName(), ".policy.md") {
				page = f.GetContent()
			}
		}
		gen, err := protogen.Options{}.New(compileRequest(t, "module="+in.module, []string{in.dir, "../../options"}, in.file))
		if err != nil {
			t.Fatal(err)
		}
		var services []*service
		for _, f := range gen.Files {
			if f.Generate {
				services = resolveFile(f, &problems{})
			}
		}
		checked += len(services)
		for _, sp := range services {
			c, err := runtime.NewClient(&sp.Policy)
			if err != nil {
				t.Fatalf("%s: %v", sp.Policy.Name, err)
			}
			text := c.Describe()
			described := a27hDescribed(t, text)
			onPage := a27hPageValues(page, sp.Policy.Name)
			if onPage == nil {
				t.Errorf("%s: no section %s on the page", in.file, sp.Policy.Name)
				continue
			}
			var diffs []string
			for k, v := range described {
				if pv, ok := onPage[k]; !ok {
					diffs = append(diffs, "Describe "+k+" = "+v+", not on the page")
				} else if pv != v {
					diffs = append(diffs, "Describe "+k+" = "+v+", the page "+pv)
				}
			}
			for k, v := range onPage {
				if _, ok := described[k]; !ok {
					diffs = append(diffs, "the page "+k+" = "+v+", not in Describe")
				}
			}
			sort.Strings(diffs)
			if len(diffs) > 0 {
				t.Errorf("%s, %s: the page and Describe differ:\n  %s\nDescribe:\n%s", in.file, sp.Policy.Name, strings.Join(diffs, "\n  "), text)
			}
			values += len(described)
		}
	}
}
