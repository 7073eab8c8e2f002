// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

// fieldCase is how the field walk exercises one field of the options: a
// policy without it and one with it (the .proto text of the service's and
// the method's options), and an override that sets it on the example's
// InventoryService (YAML under the service).
type fieldCase struct {
	svc0, svc1 string // (resilient.v1.service) without and with the field
	m0, m1     string // (resilient.v1.method) of Get without and with it
	override   string // "" for none: the field is then declared not overridable
	// exports are the exports besides the policy page that show the
	// field: "service_config", "envoy". The policy page ("docs") shows
	// every field, the walk checks it for each.
	exports []string
}

// Sample values, each valid and none the default, so that a field the
// resolver ignores leaves the generated file as it was.
var fieldCases = map[string]fieldCase{
	"idempotent":               {m0: ``, m1: `idempotent: true`},
	"timeout":                  {m1: `timeout: {seconds: 7}`, override: `methods: {GetStock: {timeout: 100ms}}`, exports: allExports},
	"overall_timeout":          {m1: `overall_timeout: {seconds: 7}`, override: `methods: {GetStock: {overall_timeout: 2s}}`, exports: allExports},
	"idempotency_key":          {m1: `idempotency_key: "id"`},
	"generate_idempotency_key": {m1: `generate_idempotency_key: true`},
	"priority":                 {m1: `priority: PRIORITY_HIGH`},

	"retry.max_attempts":       retryCase(`max_attempts: 5`, `{max_attempts: 2}`),
	"retry.initial_backoff":    retryCase(`initial_backoff: {nanos: 10000000}`, `{initial_backoff: 10ms}`),
	"retry.max_backoff":        retryCase(`max_backoff: {seconds: 2}`, `{max_backoff: 100ms}`),
	"retry.backoff_multiplier": retryCase(`backoff_multiplier: 3`, `{backoff_multiplier: 3}`),
	"retry.retryable_codes":    retryCase(`retryable_codes: ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]`, `{retryable_codes: [UNAVAILABLE, RESOURCE_EXHAUSTED]}`),

	"retry_budget.ratio":       budgetCase(`ratio: 0.3`, `{ratio: 0.2}`),
	"retry_budget.min_retries": budgetCase(`min_retries: 3`, `{min_retries: 3}`),
	"retry_budget.window":      budgetCase(`window: {seconds: 3}`, `{window: 5s}`),

	"circuit_breaker.failure_ratio":       breakerCase(`failure_ratio: 0.3`, `{failure_ratio: 0.3}`),
	"circuit_breaker.minimum_calls":       breakerCase(`minimum_calls: 5`, `{minimum_calls: 5}`),
	"circuit_breaker.window":              breakerCase(`window: {seconds: 3}`, `{window: 3s}`),
	"circuit_breaker.cool_down":           breakerCase(`cool_down: {seconds: 3}`, `{cool_down: 3s}`),
	"circuit_breaker.half_open_probes":    breakerCase(`half_open_probes: 5`, `{half_open_probes: 5}`),
	"circuit_breaker.slow_call_threshold": breakerCase(`slow_call_threshold: {seconds: 1}`, `{slow_call_threshold: 1s}`),
	"circuit_breaker.failure_codes":       breakerCase(`failure_codes: ["INTERNAL"]`, `{failure_codes: [INTERNAL]}`),
	"circuit_breaker.window_calls":        {svc0: `circuit_breaker: {}`, svc1: `circuit_breaker: {window_calls: 50}`, override: `circuit_breaker: {window_calls: 40}`, exports: []string{"envoy"}},
	"circuit_breaker.per_method": {svc0: `circuit_breaker: {}`, svc1: `circuit_breaker: {}`,
		m1: `circuit_breaker: {per_method: true}`, override: `methods: {GetStock: {circuit_breaker: {per_method: true}}}`},

	"bulkhead.permits":  {svc0: `bulkhead: {permits: 1}`, svc1: `bulkhead: {permits: 9}`, override: `bulkhead: {permits: 3}`},
	"bulkhead.max_wait": {svc0: `bulkhead: {permits: 1}`, svc1: `bulkhead: {permits: 1, max_wait: {seconds: 1}}`, override: `bulkhead: {max_wait: 1s}`},
	"bulkhead.per_method": {svc0: `bulkhead: {permits: 2}`, svc1: `bulkhead: {permits: 2}`,
		m1: `bulkhead: {per_method: true}`, override: `methods: {GetStock: {bulkhead: {per_method: true}}}`},

	"hedging.delay":           hedgingCase(`delay: {nanos: 2000}`, `{delay: 50ms}`),
	"hedging.max_copies":      hedgingCase(`delay: {nanos: 1000}, max_copies: 3`, `{delay: 50ms, max_copies: 3}`),
	"hedging.non_fatal_codes": hedgingCase(`delay: {nanos: 1000}, non_fatal_codes: ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]`, `{delay: 50ms, non_fatal_codes: [RESOURCE_EXHAUSTED]}`),

	"rate_limit.requests_per_second": {svc0: `rate_limit: {requests_per_second: 10}`, svc1: `rate_limit: {requests_per_second: 20}`, override: `rate_limit: {requests_per_second: 50}`},
	"rate_limit.burst":               {svc0: `rate_limit: {requests_per_second: 10}`, svc1: `rate_limit: {requests_per_second: 10, burst: 3}`, override: `rate_limit: {burst: 7}`},
	"rate_limit.max_wait":            {svc0: `rate_limit: {requests_per_second: 10}`, svc1: `rate_limit: {requests_per_second: 10, max_wait: {seconds: 1}}`, override: `rate_limit: {max_wait: 5ms}`},
	"rate_limit.per_method": {svc0: `rate_limit: {requests_per_second: 10}`, svc1: `rate_limit: {requests_per_second: 10}`,
		m1: `rate_limit: {per_method: true}`, override: `methods: {GetStock: {rate_limit: {per_method: true}}}`},

	"adaptive_limit.min_limit":       adaptiveCase(`min_limit: 2`, `{min_limit: 2}`),
	"adaptive_limit.max_limit":       adaptiveCase(`max_limit: 50`, `{max_limit: 6}`),
	"adaptive_limit.initial_limit":   adaptiveCase(`initial_limit: 10`, `{initial_limit: 5}`),
	"adaptive_limit.tolerance":       adaptiveCase(`tolerance: 2`, `{tolerance: 2}`),
	"adaptive_limit.smoothing":       adaptiveCase(`smoothing: 0.2`, `{smoothing: 0.2}`),
	"adaptive_limit.baseline_window": adaptiveCase(`baseline_window: {seconds: 60}`, `{baseline_window: 1m}`),
	"adaptive_limit.per_method": {svc0: `timeout: {seconds: 1} adaptive_limit: {}`, svc1: `timeout: {seconds: 1} adaptive_limit: {}`,
		m1: `adaptive_limit: {per_method: true}`, override: `methods: {GetStock: {adaptive_limit: {per_method: true}}}`},

	"client_throttle.k":           throttleCase(`k: 3`, `{k: 3}`),
	"client_throttle.window":      throttleCase(`window: {seconds: 2}`, `{window: 2s}`),
	"client_throttle.max_refusal": throttleCase(`max_refusal: 0.8`, `{max_refusal: 0.8}`),

	"cache.fresh_ttl":   cacheCase(`fresh_ttl: {seconds: 2}`, `{fresh_ttl: 2s, stale_ttl: 10m}`),
	"cache.stale_ttl":   cacheCase(`fresh_ttl: {seconds: 1}, stale_ttl: {seconds: 5}`, `{stale_ttl: 10m}`),
	"cache.key_fields":  {m0: cacheM0, m1: `idempotent: true timeout: {seconds: 1} cache: {fresh_ttl: {seconds: 1}, key_fields: ["id", "other"]}`},
	"cache.max_entries": cacheCase(`fresh_ttl: {seconds: 1}, max_entries: 5`, `{max_entries: 5}`),

	"server.min_deadline":    {m1: `server: {min_deadline: {seconds: 1}}`, override: `methods: {GetStock: {server: {min_deadline: 20ms}}}`},
	"server.default_timeout": {m1: `server: {default_timeout: {seconds: 1}}`, override: `methods: {GetStock: {server: {default_timeout: 1s}}}`},
	"server.dedup.ttl":       dedupCase(`ttl: {seconds: 2}`, `{ttl: 1h}`),
	"server.dedup.lease":     dedupCase(`ttl: {seconds: 1}, lease: {seconds: 3}`, `{lease: 5s}`),
	"server.dedup.on_store_error": dedupCase(`ttl: {seconds: 1}, on_store_error: ON_STORE_ERROR_RUN_WITHOUT_DEDUP`,
		`{on_store_error: ON_STORE_ERROR_RUN_WITHOUT_DEDUP}`),

	"shedding.low":      sheddingCase(`low: 2, normal: 2, high: 3, critical: 4`, `{low: 4}`),
	"shedding.normal":   sheddingCase(`low: 1, normal: 3, high: 3, critical: 4`, `{normal: 40}`),
	"shedding.high":     sheddingCase(`low: 1, normal: 2, high: 4, critical: 4`, `{high: 50}`),
	"shedding.critical": sheddingCase(`low: 1, normal: 2, high: 3, critical: 5`, `{critical: 70}`),
	"shedding.pushback": sheddingCase(`low: 1, normal: 2, high: 3, critical: 4, pushback: {seconds: 3}`, `{pushback: 1s}`),
	"shedding.code":     sheddingCase(`low: 1, normal: 2, high: 3, critical: 4, code: "RESOURCE_EXHAUSTED"`, `{code: UNAVAILABLE}`),
}

var allExports = []string{"service_config", "envoy"}

const cacheM0 = `idempotent: true timeout: {seconds: 1} cache: {fresh_ttl: {seconds: 1}, key_fields: ["id"]}`

func retryCase(with, override string) fieldCase {
	return fieldCase{m0: `idempotent: true retry: {}`, m1: `idempotent: true retry: {` + with + `}`,
		override: `methods: {GetStock: {retry: ` + override + `}}`, exports: allExports}
}

func budgetCase(with, override string) fieldCase {
	return fieldCase{svc0: `retry_budget: {}`, svc1: `retry_budget: {` + with + `}`, m0: `idempotent: true retry: {}`,
		m1: `idempotent: true retry: {}`, override: `retry_budget: ` + override}
}

func breakerCase(with, override string) fieldCase {
	return fieldCase{svc0: `circuit_breaker: {}`, svc1: `circuit_breaker: {` + with + `}`,
		override: `circuit_breaker: ` + override}
}

func adaptiveCase(with, override string) fieldCase {
	return fieldCase{svc0: `timeout: {seconds: 1} adaptive_limit: {}`, svc1: `timeout: {seconds: 1} adaptive_limit: {` + with + `}`,
		override: `adaptive_limit: ` + override, exports: []string{"envoy"}}
}

func throttleCase(with, override string) fieldCase {
	return fieldCase{svc0: `client_throttle: {}`, svc1: `client_throttle: {` + with + `}`,
		override: `client_throttle: ` + override, exports: []string{"envoy"}}
}

func hedgingCase(with, override string) fieldCase {
	return fieldCase{m0: `idempotent: true timeout: {seconds: 1} hedging: {delay: {nanos: 1000}}`,
		m1:       `idempotent: true timeout: {seconds: 1} hedging: {` + with + `}`,
		override: `methods: {StockReport: {hedging: ` + override + `}}`}
}

func cacheCase(with, override string) fieldCase {
	return fieldCase{m0: cacheM0, m1: `idempotent: true timeout: {seconds: 1} cache: {` + with + `, key_fields: ["id"]}`,
		override: `methods: {GetStock: {cache: ` + override + `}}`}
}

func dedupCase(with, override string) fieldCase {
	return fieldCase{m0: `idempotency_key: "id" server: {dedup: {ttl: {seconds: 1}}}`,
		m1:       `idempotency_key: "id" server: {dedup: {` + with + `}}`,
		override: `methods: {ReserveStock: {server: {dedup: ` + override + `}}}`}
}

func sheddingCase(with, override string) fieldCase {
	return fieldCase{svc0: `shedding: {low: 1, normal: 2, high: 3, critical: 4}`, svc1: `shedding: {` + with + `}`,
		override: `shedding: ` + override}
}

// leafFields lists the path of every value of md: the fields of its
// sub-messages, a duration being one value.
func leafFields(md protoreflect.MessageDescriptor, prefix string) []string {
	var out []string
	for i := range md.Fields().Len() {
		f := md.Fields().Get(i)
		path := prefix + string(f.Name())
		if sub := f.Message(); sub != nil && sub.FullName() != "google.protobuf.Duration" {
			out = append(out, leafFields(sub, path+".")...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// TestEveryOptionFieldIsWired walks every field of the options messages
// (by protoreflect, so a new field is walked without being listed) and
// fails for a field that the resolver ignores (setting it leaves the
// generated code as it was), that the README's option table does not
// list, that an operator can neither override nor is told is not
// overridable, whose override leaves no trace in Client.Changes, or that
// an export it maps to does not show.
func TestEveryOptionFieldIsWired(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := readmeOptionFields(string(readme))
	paths := leafFields((&resilientv1.Policy{}).ProtoReflect().Descriptor(), "")
	if len(paths) < 40 {
		t.Fatalf("walked %d fields", len(paths))
	}
	for i, path := range paths {
		t.Run(path, func(t *testing.T) {
			c, ok := fieldCases[path]
			if !ok {
				t.Fatalf("no case for %s: add one to fieldCases, and the field to the resolver, the README's option table and override", path)
			}
			if !documented[path] {
				t.Errorf("the README's option table has no row for %s", path)
			}
			without := generateCase(t, i, c.svc0, c.m0)
			with := generateCase(t, i, c.svc1, c.m1)
			if without["go"] == with["go"] {
				t.Errorf("setting %s leaves the generated code as it was: the resolver ignores it", path)
			}
			for _, kind := range append([]string{"docs"}, c.exports...) {
				if without[kind] == with[kind] {
					t.Errorf("setting %s leaves the %s export as it was", path, kind)
				}
			}
			if shown := docsShows(with["docs"], path); !shown {
				t.Errorf("the policy page does not show %s under its key:\n%s", path, with["docs"])
			}
			checkOverride(t, path, c.override)
		})
	}
	for path := range fieldCases {
		if !slices.Contains(paths, path) {
			t.Errorf("fieldCases has %s, which the options do not", path)
		}
	}
}

// docsShows reports whether the policy page md shows the field at path
// as set by the field walk: a value under its key, the service's
// ("`retry_budget.ratio` |") or the method's
// ("`methods.Get.retry.max_attempts` |"); a per_method as the method's
// own group ("`methods.Get.circuit_breaker.…"); the cache's key fields,
// which are not a setting, in the method's sentence.
func docsShows(md, path string) bool {
	switch group, field, _ := strings.Cut(path, "."); {
	case field == "per_method":
		return strings.Contains(md, "| `methods.Get."+group+".")
	case path == "cache.key_fields":
		return strings.Contains(md, "keyed by `id`, `other`")
	}
	return strings.Contains(md, "| `"+path+"` |") || strings.Contains(md, "| `methods.Get."+path+"` |")
}

// checkOverride sets path through an override of the example inventory
// policy: accepted, it must change the policy in force and say so in
// Changes (client side) or give server options (server side); without an
// override, the loader must refuse the field as part of the contract.
func checkOverride(t *testing.T, path, yaml string) {
	t.Helper()
	inventory := &inventoryv1.InventoryServiceResilientPolicy
	if yaml == "" {
		group, leaf, _ := strings.Cut(path, ".")
		if leaf != "" {
			yaml = fmt.Sprintf("methods: {GetStock: {%s: {%s: x}}}", group, leaf)
		} else {
			yaml = fmt.Sprintf("methods: {GetStock: {%s: x}}", path)
		}
		_, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService: {"+yaml+"}\n"), nil, inventory)
		if err == nil || !strings.Contains(err.Error(), "part of the service's contract") {
			t.Errorf("%s is declared not overridable, but the loader says: %v", path, err)
		}
		return
	}
	s, err := override.Parse("o.yaml", []byte("services:\n  example.inventory.v1.InventoryService: {"+yaml+"}\n"), nil, inventory)
	if err != nil {
		t.Fatalf("override of %s refused: %v", path, err)
	}
	if strings.HasPrefix(path, "server.") || strings.HasPrefix(path, "shedding.") {
		opts, err := s.ServerOptions(&inventoryv1.InventoryServiceServerPolicy)
		if err != nil || len(opts) == 0 {
			t.Errorf("override of %s gives server options %v, %v", path, opts, err)
		}
		return
	}
	rt, err := runtime.NewClient(inventory, s.Options(inventory)...)
	if err != nil {
		t.Fatal(err)
	}
	group, _, _ := strings.Cut(path, ".")
	for _, ch := range rt.Changes() {
		if strings.Contains(ch.Key, group) {
			return
		}
	}
	t.Errorf("override of %s leaves no change of %s in Changes(): %+v", path, group, rt.Changes())
}

// generateCase runs the plugin, with every export, on a service whose
// options are svc and whose method Get's are m, and returns the content
// of each output by kind: go, docs, service_config, envoy.
func generateCase(t *testing.T, n int, svc, m string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	pkg := fmt.Sprintf("c%d", n)
	src := fmt.Sprintf(`syntax = "proto3";
package fieldwalk.%s;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/fieldwalk/%s;%s";
service Svc {
  option (resilient.v1.service) = {%s};
  rpc Get(Req) returns (Resp) {
    option (resilient.v1.method) = {%s};
  }
}
message Req {
  string id = 1;
  string other = 2;
}
message Resp {}
`, pkg, pkg, pkg, svc, m)
	if err := os.WriteFile(filepath.Join(dir, "f.proto"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	req := compileRequest(t, "module="+testModule+",service_config=true,envoy=true,docs=true", []string{dir, "../../options"}, "f.proto")
	resp := runPluginParams(t, req)
	if resp.Error != nil {
		t.Fatalf("the plugin refused\n%s\n%s", src, resp.GetError())
	}
	out := map[string]string{}
	for _, f := range resp.File {
		switch name := f.GetName(); {
		case strings.HasSuffix(name, ".go"):
			out["go"] = f.GetContent()
		case strings.HasSuffix(name, ".policy.md"):
			out["docs"] = f.GetContent()
		case strings.HasSuffix(name, ".service_config.json"):
			out["service_config"] = f.GetContent()
		case strings.HasSuffix(name, ".yaml"):
			out["envoy"] += f.GetContent()
		}
	}
	return out
}

// readmeOptionFields returns the field paths the README's option table
// has a row for: the first column's names in backquotes, where ".normal"
// continues the group of the name before it.
func readmeOptionFields(readme string) map[string]bool {
	_, table, _ := strings.Cut(readme, "\n## Options\n")
	table, _, _ = strings.Cut(table, "\n## ")
	names := regexp.MustCompile("`([a-z_.]+)`")
	out := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		group := ""
		for _, m := range names.FindAllStringSubmatch(first, -1) {
			name := m[1]
			if strings.HasPrefix(name, ".") {
				name = group + name
			} else if i := strings.IndexByte(name, '.'); i > 0 {
				group = name[:i]
			}
			out[name] = true
		}
	}
	return out
}
