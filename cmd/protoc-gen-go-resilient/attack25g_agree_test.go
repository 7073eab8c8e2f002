// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// attack25gRun compiles src as name and returns the plugin's refusals
// (file:line:col, then the rest), the files it wrote, and lint's findings
// on the same file as "RULE rest" (RESILIENT_NO_TIMEOUT left out).
func attack25gRun(t *testing.T, name, src string) (plugin []string, files int, lint []string) {
	t.Helper()
	out, perr := attackProto(t, name, src, "service_config=true,envoy=true,docs=true")
	if perr != "" {
		plugin = strings.Split(perr, "\n")
	}
	dir := t.TempDir()
	writeFile(t, dir+"/"+name, []byte(src))
	req := compileRequest(t, "module="+testModule, []string{dir, "../../options"}, name)
	lintFindings(t, req, func(d protoreflect.Descriptor, fi rules.Finding) {
		if fi.Rule != rules.RuleNoTimeout {
			lint = append(lint, fmt.Sprintf("%s %s: %s: %s", fi.Rule, d.FullName(), fi.Level.OptionPath(fi.Path), fi.Message))
		}
	})
	return plugin, len(out), lint
}

// attack25gAgree fails unless lint finds exactly the plugin's refusals,
// in its order and words, and nothing is written when there are any; it
// returns the rules lint fired.
func attack25gAgree(t *testing.T, name string, plugin []string, files int, lint []string) []string {
	t.Helper()
	var want, got, fired []string
	for _, l := range plugin {
		_, rest, _ := strings.Cut(l, ": ")
		want = append(want, rest)
	}
	for _, l := range lint {
		rule, rest, _ := strings.Cut(l, " ")
		got = append(got, rest)
		fired = append(fired, rule)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: lint finds:\n%s\nthe plugin refuses:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(plugin) > 0 && files != 0 {
		t.Errorf("%s: %d files written beside the refusal", name, files)
	}
	return fired
}

// TestAttack25gStreamsRefuseUnaryOptions: each option the table says is
// for unary calls only, written on a method of each kind of stream, is
// refused by the plugin and by lint in the same words, under the rule the
// README's lint table names, at the method's option
// (file:line:column), naming the method and its kind; nothing is written.
// The options that streams take (timeout, a breaker or bulkhead of their
// own, priority, server.min_deadline) generate.
func TestAttack25gStreamsRefuseUnaryOptions(t *testing.T) {
	refused := []struct{ opt, rule, path, words string }{
		{`idempotent: true, timeout: {seconds: 1}, hedging: {delay: {nanos: 1000}}`, rules.RuleHedging, "hedging", "streams are not hedged"},
		{`idempotent: true, timeout: {seconds: 1}, cache: {fresh_ttl: {seconds: 1}, key_fields: ["id"]}`, rules.RuleCache, "cache", "streams are not cached"},
		{`rate_limit: {per_method: true, requests_per_second: 1}`, rules.RuleScope, "rate_limit", "only unary calls are rate limited"},
		{`timeout: {seconds: 1}, adaptive_limit: {per_method: true}`, rules.RuleAdaptive, "adaptive_limit", "streams take no part in the adaptive limit"},
		{`idempotency_key: "id"`, rules.RuleKeyField, "idempotency_key", "only unary calls send an idempotency key"},
		{`generate_idempotency_key: true`, rules.RuleKeyField, "generate_idempotency_key", "only unary calls send an idempotency key"},
		{`server: {dedup: {ttl: {seconds: 5}}}`, rules.RuleServer, "server.dedup", "only unary requests are deduplicated"},
		{`idempotent: true, retry: {max_attempts: 1}`, rules.RuleStreamRetry, "retry", "streams are not retried"},
		{`retry: {}`, rules.RuleStreamRetry, "retry", "streams are not retried"},
	}
	accepted := []string{
		`timeout: {seconds: 1}, overall_timeout: {seconds: 2}`,
		`circuit_breaker: {per_method: true, slow_call_threshold: {seconds: 1}}`,
		`bulkhead: {per_method: true, permits: 1, max_wait: {seconds: 1}}`,
		`priority: PRIORITY_HIGH, server: {min_deadline: {seconds: 1}}`,
		`idempotent: false`,
	}
	kinds := []struct{ sig, kind string }{
		{"stream Req) returns (Resp", "client-streaming"},
		{"Req) returns (stream Resp", "server-streaming"},
		{"stream Req) returns (stream Resp", "bidi-streaming"},
	}
	src := func(sig, opt string) string {
		return `syntax = "proto3";
package atk.s25g;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/atk/s25g";
message Req { string id = 1; }
message Resp {}
service S {
  option (resilient.v1.service) = {timeout: {seconds: 3}};
  rpc M(` + sig + `) { option (resilient.v1.method) = {` + opt + `}; }
}
`
	}
	for _, k := range kinds {
		for _, r := range refused {
			plugin, files, lint := attack25gRun(t, "s.proto", src(k.sig, r.opt))
			at := fmt.Sprintf("%s with %s", k.kind, r.opt)
			fired := attack25gAgree(t, at, plugin, files, lint)
			want := fmt.Sprintf("s.proto:9:%d: atk.s25g.S.M: (resilient.v1.method).%s: %s, and M is a %s method", 13+len(k.sig), r.path, r.words, k.kind)
			if len(plugin) != 1 || !strings.HasPrefix(plugin[0], want) {
				t.Errorf("%s: the plugin says\n%s\nwant one line starting\n%s", at, strings.Join(plugin, "\n"), want)
			}
			if !slices.Equal(fired, []string{r.rule}) {
				t.Errorf("%s: lint fires %v, want [%s]", at, fired, r.rule)
			}
		}
		for _, opt := range accepted {
			plugin, files, lint := attack25gRun(t, "s.proto", src(k.sig, opt))
			if len(plugin) != 0 || len(lint) != 0 || files == 0 {
				t.Errorf("%s with %s: refused (%d files):\n%s\nlint: %v", k.kind, opt, files, strings.Join(plugin, "\n"), lint)
			}
		}
	}
}

// TestAttack25gKeyFieldsProto2AndEditions: idempotency keys in proto2 and
// editions requests. A field with a default other than its zero value
// (a string "x", an integer 7 or -1) is refused, a group or a delimited
// message is refused as a message, an explicit zero default, a required
// field, an implicit-presence field and a plain field are accepted; the
// plugin and lint agree, at the method's option, under
// RESILIENT_KEY_FIELD.
func TestAttack25gKeyFieldsProto2AndEditions(t *testing.T) {
	cases := []struct {
		name, src string
		refused   map[string]string // method → what the refusal says
	}{
		{"p2.proto", `syntax = "proto2";
package atk.p2;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/atk/p2";
message Req {
  optional string id = 1 [default = "x"];
  optional int32 n = 2 [default = 0];
  required string r = 3;
  optional group G = 4 { optional string g = 5; }
  optional bytes b = 6 [default = ""];
  optional uint64 u = 7 [default = 7];
  optional string plain = 8;
}
message Resp {}
service S {
  rpc A(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "id"}; }
  rpc B(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "n", retry: {}}; }
  rpc C(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "r", retry: {}}; }
  rpc D(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "g"}; }
  rpc F(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "b", retry: {}}; }
  rpc H(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "u"}; }
  rpc I(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "plain", retry: {}}; }
}
`, map[string]string{"A": `has the default "x"`, "D": `is a message (atk.p2.Req.G)`, "H": `has the default 7`}},
		{"ed.proto", `edition = "2023";
package atk.ed;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/atk/ed";
message Req {
  string id = 1 [default = "x"];
  string imp = 2 [features.field_presence = IMPLICIT];
  int64 n = 3 [default = -1];
  string req = 4 [features.field_presence = LEGACY_REQUIRED];
  Sub d = 5 [features.message_encoding = DELIMITED];
  string plain = 6;
  int32 zero = 7 [default = 0];
}
message Sub { string s = 1; }
message Resp {}
service S {
  rpc A(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "id"}; }
  rpc B(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "imp", retry: {}}; }
  rpc C(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "n"}; }
  rpc D(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "req", retry: {}}; }
  rpc E(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "d"}; }
  rpc F(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "plain", retry: {}}; }
  rpc G(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "zero", retry: {}}; }
}
`, map[string]string{"A": `has the default "x"`, "C": `has the default -1`, "E": `is a message (atk.ed.Sub)`}},
	}
	for _, c := range cases {
		plugin, files, lint := attack25gRun(t, c.name, c.src)
		fired := attack25gAgree(t, c.name, plugin, files, lint)
		lines := strings.Split(c.src, "\n")
		seen := map[string]bool{}
		for i, l := range plugin {
			if fired[i] != rules.RuleKeyField {
				t.Errorf("%s: %s fired for %s", c.name, fired[i], l)
			}
			pos, rest, _ := strings.Cut(l, ": ")
			full, rest, _ := strings.Cut(rest, ": ")
			m := full[strings.LastIndex(full, ".")+1:]
			seen[m] = true
			if !strings.HasPrefix(rest, "(resilient.v1.method).idempotency_key: ") || !strings.Contains(rest, c.refused[m]) || c.refused[m] == "" {
				t.Errorf("%s: unexpected refusal %s", c.name, l)
			}
			// At the option of the method's line.
			var line, col int
			fmt.Sscanf(strings.TrimPrefix(pos, c.name+":"), "%d:%d", &line, &col)
			if line < 1 || line > len(lines) || !strings.Contains(lines[line-1], "rpc "+m+"(") || !strings.HasPrefix(lines[line-1][col-1:], "option (resilient.v1.method)") {
				t.Errorf("%s: %s is not at the option of %s", c.name, pos, m)
			}
		}
		for m := range c.refused {
			if !seen[m] {
				t.Errorf("%s: %s accepted, want refused (%s)", c.name, m, c.refused[m])
			}
		}
	}
}

// TestAttack25gLevelsContradict: a method overriding its service into a
// combination the table refuses, or out of one, across levels: the plugin
// and lint agree, under the rule the README names, at the level written;
// the combinations mended at the method generate.
func TestAttack25gLevelsContradict(t *testing.T) {
	cases := []struct {
		service, methods string
		want             []string // "RULE element: option.path"
	}{
		// The service's key names a field another request lacks.
		{`idempotency_key: "id", retry: {}`, `rpc A(Req) returns (Resp); rpc B(Other) returns (Resp); rpc W(Req) returns (stream Resp);`,
			[]string{"RESILIENT_KEY_FIELD atk.l25g.S.B: (resilient.v1.service).idempotency_key"}},
		// The method empties the service's key: its inherited retry is unsafe.
		{`idempotency_key: "id", retry: {}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: ""}; }`,
			[]string{"RESILIENT_RETRY_NOT_IDEMPOTENT atk.l25g.S.A: (resilient.v1.service).retry"}},
		// The method says it is not idempotent under a retrying service.
		{`retry: {}, idempotent: true`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {idempotent: false}; }`,
			[]string{"RESILIENT_RETRY_NOT_IDEMPOTENT atk.l25g.S.A: (resilient.v1.service).retry"}},
		// The method turns the service's generated key off.
		{`generate_idempotency_key: true, retry: {}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {generate_idempotency_key: false}; } rpc W(stream Req) returns (Resp);`,
			[]string{"RESILIENT_RETRY_NOT_IDEMPOTENT atk.l25g.S.A: (resilient.v1.service).retry"}},
		// Hedging under the service's retry, and with it turned off.
		{`retry: {}, idempotent: true, timeout: {seconds: 1}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {hedging: {delay: {nanos: 1000000}}}; }`,
			[]string{"RESILIENT_HEDGING atk.l25g.S.A: (resilient.v1.method).hedging"}},
		{`retry: {}, idempotent: true, timeout: {seconds: 1}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {hedging: {delay: {nanos: 1000000}}, retry: {max_attempts: 1}}; }`, nil},
		// A hedging delay not below the service's timeout.
		{`idempotent: true, timeout: {seconds: 1}, overall_timeout: {seconds: 5}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {hedging: {delay: {seconds: 2}}}; }`,
			[]string{"RESILIENT_HEDGING atk.l25g.S.A: (resilient.v1.method).hedging.delay"}},
		// A window under the service's window_calls.
		{`circuit_breaker: {window_calls: 50}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {circuit_breaker: {per_method: true, window: {seconds: 1}}}; }`,
			[]string{"RESILIENT_ADAPTIVE atk.l25g.S.A: (resilient.v1.method).circuit_breaker.window"}},
		// The service's dedup reaches a method without a key and a stream.
		{`server: {dedup: {ttl: {seconds: 5}}}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "id"}; } rpc B(Req) returns (Resp); rpc W(Req) returns (stream Resp);`,
			[]string{"RESILIENT_SERVER atk.l25g.S.B: (resilient.v1.service).server.dedup", "RESILIENT_SERVER atk.l25g.S.W: (resilient.v1.service).server.dedup"}},
		// idempotent: false beside the method's own idempotency_level.
		{`timeout: {seconds: 1}`, `rpc A(Req) returns (Resp) { option idempotency_level = NO_SIDE_EFFECTS; option (resilient.v1.method) = {idempotent: false}; }`,
			[]string{"RESILIENT_IDEMPOTENCY_CONTRADICTION atk.l25g.S.A: (resilient.v1.method).idempotent"}},
		// A cache on a method the service calls idempotent, with a key.
		{`timeout: {seconds: 1}, idempotent: true`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {cache: {fresh_ttl: {seconds: 1}, key_fields: ["id"]}, idempotency_key: "id"}; }`, nil},
		// A cache on a method the service marks idempotent but the method un-marks.
		{`timeout: {seconds: 1}, idempotent: true`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {idempotent: false, cache: {fresh_ttl: {seconds: 1}, key_fields: ["id"]}}; }`,
			[]string{"RESILIENT_CACHE atk.l25g.S.A: (resilient.v1.method).cache"}},
		// The service's per-attempt timeout above the method's overall one.
		{`timeout: {seconds: 2}`, `rpc A(Req) returns (Resp) { option (resilient.v1.method) = {overall_timeout: {seconds: 1}}; }`,
			[]string{"RESILIENT_TIMEOUT_EXCEEDS_OVERALL atk.l25g.S.A: (resilient.v1.method).overall_timeout"}},
	}
	for i, c := range cases {
		src := `syntax = "proto3";
package atk.l25g;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/atk/l25g";
message Req { string id = 1; }
message Other { string x = 1; }
message Resp {}
service S {
  option (resilient.v1.service) = {` + c.service + `};
  ` + c.methods + `
}
`
		name := fmt.Sprintf("l%d.proto", i)
		plugin, files, lint := attack25gRun(t, name, src)
		attack25gAgree(t, name, plugin, files, lint)
		var got []string
		for _, l := range lint {
			head, _, _ := strings.Cut(l, ": (")
			path, _, _ := strings.Cut(strings.TrimPrefix(l, head+": "), ": ")
			got = append(got, head+": "+path)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s (service %s; %s):\ngot  %q\nwant %q\n%s", name, c.service, c.methods, got, c.want, strings.Join(plugin, "\n"))
		}
		if len(c.want) == 0 && files == 0 {
			t.Errorf("%s: accepted but nothing written", name)
		}
	}
}

// TestAttack25gServiceWithoutMethods: a service that declares no method
// had its values checked one by one (a failure_ratio of 2, a hedging on
// it were refused), but the checks that relate two values are made only
// in the policy of each method, and there is none: a timeout above its
// overall_timeout, an initial_backoff above the default max_backoff, a
// min_deadline above its default_timeout were accepted, and the code
// written for it. Its option applies to nothing, and is now refused as
// such, as a file option in a file without services is.
func TestAttack25gServiceWithoutMethods(t *testing.T) {
	src := func(opt string) string {
		return `syntax = "proto3";
package atk.e25g;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/atk/e25g";
service Empty {
  option (resilient.v1.service) = {` + opt + `};
}
`
	}
	// Whatever the option holds (a value wrong alone, values wrong
	// together, which only a method's policy would check, or nothing
	// wrong), it applies to nothing: refused under RESILIENT_SCOPE alone,
	// as a file option in a file without services is, and nothing written.
	for _, opt := range []string{
		`circuit_breaker: {failure_ratio: 2}`,
		`hedging: {delay: {seconds: 1}}`,
		`shedding: {low: 30, normal: 20, high: 40, critical: 50}`,
		`timeout: {seconds: 2}, overall_timeout: {seconds: 1}`,
		`retry: {initial_backoff: {seconds: 5}}`,
		`server: {min_deadline: {seconds: 5}, default_timeout: {seconds: 1}}`,
		`timeout: {seconds: 1}`,
	} {
		plugin, files, lint := attack25gRun(t, "e.proto", src(opt))
		if fired := attack25gAgree(t, opt, plugin, files, lint); len(fired) != 1 || fired[0] != rules.RuleScope {
			t.Errorf("%s: lint fires %v, want [%s]", opt, fired, rules.RuleScope)
		}
		if len(plugin) != 1 || !strings.Contains(plugin[0], "Empty declares no method") {
			t.Errorf("%s on a service without methods: plugin says %q (%d files written), want the one refusal that it applies to nothing", opt, plugin, files)
		}
	}
}
