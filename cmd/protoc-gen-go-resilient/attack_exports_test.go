// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/internal/bound"
	"github.com/go-resilient/resilient/runtime/policy"
)

// attackProto compiles one .proto written by a test and runs the plugin
// on it with params; it returns the files written and the plugin's error.
func attackProto(t *testing.T, name, src, params string) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, name), []byte(src))
	req := compileRequest(t, "module="+testModule+","+params, []string{dir, "../../options"}, name)
	resp := runPluginParams(t, req)
	out := map[string]string{}
	for _, f := range resp.File {
		out[f.GetName()] = f.GetContent()
	}
	return out, resp.GetError()
}

// The mixed service, testdata/export/attack_mixed.proto: a service of
// mixed safety, its retries inherited from the file and the service: an
// idempotent read by protobuf's own option, one by the project's flag, a
// plain write, a keyed write, a write with a generated key, and one stream
// of each kind, with names that have underscores and a package with dots
// and underscores.
const mixedSvc = "attack.mixed_pkg.v1.Mixed_Service"

func mixedFiles(t *testing.T, params string) map[string]string {
	t.Helper()
	return exportFiles(t, "attack_mixed", params)
}

type scMethod struct {
	Name          []struct{ Service, Method string }
	Timeout       string
	RetryPolicy   *struct{ MaxAttempts int }
	HedgingPolicy *struct{ MaxAttempts int }
}

func parseServiceConfig(t *testing.T, sc string) map[string]scMethod {
	t.Helper()
	var parsed struct{ MethodConfig []scMethod }
	if err := json.Unmarshal([]byte(sc), &parsed); err != nil {
		t.Fatalf("%v in:\n%s", err, sc)
	}
	out := map[string]scMethod{}
	for _, mc := range parsed.MethodConfig {
		for _, n := range mc.Name {
			out[n.Service+"/"+n.Method] = mc
		}
	}
	return out
}

// TestAttackServiceConfigMixedSafety: in a service of mixed safety whose
// retries come from the file, only the methods any caller may repeat get a
// retry policy; the others, and every stream, are one attempt; the
// timeouts are no longer than what the generated Go client allows.
func TestAttackServiceConfigMixedSafety(t *testing.T) {
	mcs := parseServiceConfig(t, mixedFiles(t, "service_config=true")["attack_mixed/attack_mixed.service_config.json"])
	for _, tc := range []struct {
		method  string
		retried bool
		timeout string
	}{
		// 4 attempts of 100 ms and backoffs of 1, 2, 2 ms: 405 ms, inside
		// the 2 s overall_timeout. The longest a Go call runs.
		{"Read_NoSideEffects", true, "2s"},
		{"ReadFlag", true, "2s"},
		// One attempt, cut by the Go client at its 100 ms timeout.
		{"Write_Plain", false, "0.100s"},
		{"WriteKeyed", false, "0.100s"},
		{"WriteGenerated", false, "0.100s"},
		// Streams: never retried; the overall_timeout bounds the stream.
		{"Watch", false, "2s"},
		{"Upload", false, "2s"},
		{"Chat", false, "2s"},
	} {
		mc, ok := mcs[mixedSvc+"/"+tc.method]
		if !ok {
			t.Errorf("%s: no methodConfig", tc.method)
			continue
		}
		if got := mc.RetryPolicy != nil; got != tc.retried {
			t.Errorf("%s: retryPolicy present %v, want %v", tc.method, got, tc.retried)
		}
		if mc.HedgingPolicy != nil {
			t.Errorf("%s: hedged by the export", tc.method)
		}
		if mc.Timeout != tc.timeout {
			t.Errorf("%s: timeout %q, want %q (what the Go client allows one call)", tc.method, mc.Timeout, tc.timeout)
		}
	}
}

// TestAttackExportOneAttemptBound: a call made of one attempt is cut by the
// Go client at min(timeout, overall_timeout); the exports must not let it
// run for the overall_timeout. README: a keyed method's exported "timeout
// is that of one attempt".
func TestAttackExportOneAttemptBound(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		mp   policy.Method
		want time.Duration
	}{
		{"no retry, both timeouts", policy.Method{Timeout: 300 * ms, OverallTimeout: time.Second}, 300 * ms},
		{"no retry, overall shorter", policy.Method{Timeout: 300 * ms, OverallTimeout: 300 * ms}, 300 * ms},
		{"keyed one attempt", *oneAttempt(&policy.Method{IdempotencyKey: "k", Timeout: 200 * ms, OverallTimeout: time.Second,
			Retry: &policy.Retry{MaxAttempts: 3, InitialBackoff: ms, MaxBackoff: 5 * ms, Multiplier: 2}}), 200 * ms},
		{"overall only", policy.Method{OverallTimeout: time.Second}, time.Second},
	} {
		if got := bound.Call(&tc.mp); got != tc.want {
			t.Errorf("%s: bound.Call = %v, want %v", tc.name, got, tc.want)
		}
	}

	// The export's own test file: Pay has a generated key, the service's
	// 200 ms timeout and an overall_timeout of 1 s.
	sc := exportFiles(t, "export", "service_config=true")["export/export.service_config.json"]
	if got := parseServiceConfig(t, sc)["resilienttest.export.Orders/Pay"].Timeout; got != "0.200s" {
		t.Errorf("Pay, sent once by a caller without its key: service config timeout %q, want the one attempt's 0.200s", got)
	}
	envoy := exportFiles(t, "export", "envoy=true")["export/export.envoy.yaml"]
	plain := envoy[strings.Index(envoy, "- name: resilienttest.export.Orders/Pay\n"):]
	plain = plain[:strings.Index(plain, "max_stream_duration")]
	if !strings.Contains(plain, "timeout: 0.200s") {
		t.Errorf("Pay's route for requests without the key is not bounded as one attempt:\n%s", plain)
	}
}

// TestAttackServiceConfigMixedRoundTrip loads the mixed service's config
// into a plain grpc-go channel and counts, on a loopback server answering
// UNAVAILABLE, what each unary method sends: every unsafe method exactly
// once, whatever the file and service say.
func TestAttackServiceConfigMixedRoundTrip(t *testing.T) {
	sc := mixedFiles(t, "service_config=true")["attack_mixed/attack_mixed.service_config.json"]
	srv, addr := startCountingServer(t)
	for _, tc := range []struct {
		method string
		calls  int
	}{
		{"Read_NoSideEffects", 4},
		{"ReadFlag", 4},
		{"Write_Plain", 1},
		{"WriteKeyed", 1},
		{"WriteGenerated", 1},
	} {
		srv.set(codes.Unavailable, 0)
		method := "/" + mixedSvc + "/" + tc.method
		cc := dialWithServiceConfig(t, addr, sc)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := cc.Invoke(ctx, method, new(emptypb.Empty), new(emptypb.Empty))
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want UNAVAILABLE", tc.method, err)
		}
		if got := srv.count(method); got != tc.calls {
			t.Errorf("%s: the server received %d calls, want %d", tc.method, got, tc.calls)
		}
	}

	// A plain write against a hanging server: the Go client cuts its one
	// attempt at 100 ms; the plain client must not wait the 2 s overall.
	srv.set(codes.OK, 5*time.Second)
	cc := dialWithServiceConfig(t, addr, sc)
	start := time.Now()
	err := cc.Invoke(context.Background(), "/"+mixedSvc+"/Write_Plain", new(emptypb.Empty), new(emptypb.Empty))
	if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || took < 100*time.Millisecond || took > time.Second {
		t.Errorf("Write_Plain against a hanging server: %v after %v, want DEADLINE_EXCEEDED after about 100ms", err, took)
	}
}

// TestAttackEnvoyMixedSafety: in the Envoy routes of the mixed service, a
// method that is not idempotent is retried only on a route that requires a
// non-empty idempotency-key, placed before its route without retries;
// streams and plain writes never get a retry_policy.
func TestAttackEnvoyMixedSafety(t *testing.T) {
	y := mixedFiles(t, "envoy=true")["attack_mixed/attack_mixed.envoy.yaml"]
	// envoytest parses it into go-control-plane's types and matches
	// requests with, without and with an empty key against it.
	checkGolden(t, "attack_mixed.envoy.yaml", y)
	routes := strings.Split(y, "\n    - name: ")
	retried := map[string]bool{}
	order := []string{}
	for _, r := range routes[1:] {
		name := r[:strings.Index(r, "\n")]
		var values []string
		for _, line := range strings.Split(r, "\n") {
			values = append(values, strings.SplitN(line, "#", 2)[0])
		}
		v := strings.Join(values, "\n")
		retried[name] = strings.Contains(v, "retry_policy:")
		order = append(order, name)
		if strings.Contains(name, " with idempotency-key") && !strings.Contains(v, `regex: ".+"`) {
			t.Errorf("route %s does not require a key with a value", name)
		}
	}
	p := mixedSvc + "/"
	want := map[string]bool{
		p + "Read_NoSideEffects": true, p + "ReadFlag": true, p + "Write_Plain": false,
		p + "WriteKeyed with idempotency-key": true, p + "WriteKeyed": false,
		p + "WriteGenerated with idempotency-key": true, p + "WriteGenerated": false,
		p + "Watch": false, p + "Upload": false, p + "Chat": false,
	}
	for name, w := range want {
		got, ok := retried[name]
		if !ok {
			t.Errorf("no route %q in:\n%s", name, y)
		} else if got != w {
			t.Errorf("route %q retried %v, want %v", name, got, w)
		}
	}
	if len(retried) != len(want) {
		t.Errorf("routes %v, want exactly %d", order, len(want))
	}
	for i, name := range order {
		if base, ok := strings.CutSuffix(name, " with idempotency-key"); ok && (i+1 >= len(order) || order[i+1] != base) {
			t.Errorf("the keyed route %q is not followed by its keyless one: %v", name, order)
		}
	}
}

// TestAttackDocsMixedSafety: the policy page says, for each method retried
// only with its key, that the exports retry it only with the key, and for
// each stream that it is not retried, whatever the file says.
func TestAttackDocsMixedSafety(t *testing.T) {
	md := mixedFiles(t, "docs=true")["attack_mixed/attack_mixed.policy.md"]
	sections := strings.Split(md, "\n### ")
	for _, s := range sections[1:] {
		name := s[:strings.Index(s, "\n")]
		keyed := name == "WriteKeyed" || name == "WriteGenerated"
		if got := strings.Contains(s, "Retried by the exports only with its key"); got != keyed {
			t.Errorf("%s: sentence 'Retried by the exports only with its key' present %v, want %v:\n%s", name, got, keyed, s)
		}
		stream := name == "Watch" || name == "Upload" || name == "Chat"
		if stream && !strings.Contains(s, "| `methods."+name+".retry` | none | streams are not retried |") {
			t.Errorf("%s: the page does not say the stream is not retried:\n%s", name, s)
		}
		if stream && strings.Contains(s, ".retry.") {
			t.Errorf("%s: the page shows retry settings of a stream:\n%s", name, s)
		}
		if name == "Write_Plain" && !strings.Contains(s, "| `methods.Write_Plain.retry` | none |") {
			t.Errorf("Write_Plain: not one attempt:\n%s", s)
		}
		if name == "Read_NoSideEffects" && !strings.Contains(s, "| `methods.Read_NoSideEffects.idempotent` | true | `idempotency_level = NO_SIDE_EFFECTS` |") {
			t.Errorf("Read_NoSideEffects: idempotency not credited to idempotency_level:\n%s", s)
		}
	}
}

// TestAttackIdempotencyConflicts: idempotent: false beside NO_SIDE_EFFECTS
// on one method is refused at the method; idempotent: false on the service
// does not win over a method's own NO_SIDE_EFFECTS (the more specific
// statement), and a method without either stays unsafe: its inherited
// retries are refused, so nothing unsafe reaches the exports.
func TestAttackIdempotencyConflicts(t *testing.T) {
	const head = `syntax = "proto3";
package attack.conflict;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/conflict";
`
	_, perr := attackProto(t, "c1.proto", head+`service S {
  rpc M(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {idempotent: false, retry: {}};
  }
}
`, "service_config=true")
	if !strings.Contains(perr, "c1.proto:9:5: attack.conflict.S.M: (resilient.v1.method).idempotent: false contradicts option idempotency_level = NO_SIDE_EFFECTS") {
		t.Errorf("the contradiction on one method gave %q", perr)
	}

	files, perr := attackProto(t, "c2.proto", head+`service S {
  option (resilient.v1.service) = {idempotent: false, retry: {}, timeout: {nanos: 100000000}};
  rpc Read(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
  rpc Write(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {retry: {max_attempts: 1}};
  }
}
`, "service_config=true")
	if perr != "" {
		t.Fatal(perr)
	}
	mcs := parseServiceConfig(t, files["attack/conflict/c2.service_config.json"])
	if mcs["attack.conflict.S/Read"].RetryPolicy == nil || mcs["attack.conflict.S/Write"].RetryPolicy != nil {
		t.Errorf("Read retried %v (want true), Write retried %v (want false)",
			mcs["attack.conflict.S/Read"].RetryPolicy != nil, mcs["attack.conflict.S/Write"].RetryPolicy != nil)
	}

	_, perr = attackProto(t, "c3.proto", head+`service S {
  option (resilient.v1.service) = {idempotent: false, retry: {}};
  rpc Write(google.protobuf.Empty) returns (google.protobuf.Empty) {}
}
`, "service_config=true,envoy=true")
	if !strings.Contains(perr, "Write is not idempotent and has no idempotency_key") {
		t.Errorf("inherited retries of an unsafe method gave %q, want them refused", perr)
	}
}

// TestAttackCallBoundHuge: max_attempts is any uint32 the plugin accepts;
// the exported bound saturates instead of wrapping to a short timeout,
// and is computed at once instead of in billions of steps.
func TestAttackCallBoundHuge(t *testing.T) {
	ms := time.Millisecond
	const maxDuration = time.Duration(1<<63 - 1)
	for _, tc := range []struct {
		name string
		mp   policy.Method
		want time.Duration
	}{
		{"1e9 attempts of 10s: saturates", policy.Method{Timeout: 10 * time.Second,
			Retry: &policy.Retry{MaxAttempts: 1e9, InitialBackoff: 50 * ms, MaxBackoff: time.Second, Multiplier: 2}}, maxDuration},
		{"4294967295 attempts of 1ms, multiplier 1", policy.Method{Timeout: ms,
			Retry: &policy.Retry{MaxAttempts: 1<<32 - 1, InitialBackoff: ms, MaxBackoff: time.Second, Multiplier: 1}},
			time.Duration(1<<32-1)*ms + time.Duration(1<<32-2)*ms},
		{"a bound that reaches the cap", policy.Method{Timeout: ms,
			Retry: &policy.Retry{MaxAttempts: 1000, InitialBackoff: ms, MaxBackoff: 4 * ms, Multiplier: 2}},
			1000*ms + ms + 2*ms + 997*4*ms},
	} {
		start := time.Now()
		got := bound.Call(&tc.mp)
		if took := time.Since(start); took > 100*ms {
			t.Errorf("%s: bound.Call took %v", tc.name, took)
		}
		if got != tc.want {
			t.Errorf("%s: bound.Call = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAttackEnvoyCommentsWhatItCannotCarry: README, Export: Envoy: "Every
// value the mapping cannot carry is written as a comment at its place."
// The rate limit (the service's and a method's own) and the cache have no
// place in the mapping, so each must be a comment.
func TestAttackEnvoyCommentsWhatItCannotCarry(t *testing.T) {
	files, perr := attackProto(t, "uncarried.proto", `syntax = "proto3";
package attack.uncarried;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/uncarried";
message Req { string sku = 1; }
message Resp {}
service S {
  option (resilient.v1.service) = {rate_limit: {requests_per_second: 50, burst: 10}};
  rpc Get(Req) returns (Resp) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {
      timeout: {seconds: 1}
      cache: {fresh_ttl: {seconds: 2}, key_fields: ["sku"]}
      rate_limit: {per_method: true, requests_per_second: 5}
    };
  }
}
`, "envoy=true")
	if perr != "" {
		t.Fatal(perr)
	}
	y := files["attack/uncarried/uncarried.envoy.yaml"]
	for _, want := range []string{
		"# not exported: the method's own rate_limit (5/s, burst 10)",
		"# not exported: cache (fresh 2s, stale 2s, keyed by sku)",
		"# not exported: rate_limit (50/s, burst 10)",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("the Envoy output lacks %q:\n%s", want, y)
		}
	}
}

// TestAttackExportsDeadlineExceeded: the generated client repeats after
// DEADLINE_EXCEEDED only when the attempt's own timeout expired, never
// after a DEADLINE_EXCEEDED the server returned (README, Failures and
// answers). A gRPC client has no per-attempt timeout, so the only
// DEADLINE_EXCEEDED it could retry is the server's: the service config
// must not list it, and Envoy must retry an expired per_try_timeout
// (gateway-error), not the server's code (deadline-exceeded).
func TestAttackExportsDeadlineExceeded(t *testing.T) {
	files, perr := attackProto(t, "dl.proto", `syntax = "proto3";
package attack.dl;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/dl";
service S {
  option (resilient.v1.service) = {timeout: {nanos: 200000000}};
  rpc Both(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 1000000}, retryable_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
  rpc Only(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {initial_backoff: {nanos: 1000000}, max_backoff: {nanos: 1000000}, retryable_codes: ["DEADLINE_EXCEEDED"]}};
  }
  rpc Hedged(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {hedging: {delay: {nanos: 10000000}, non_fatal_codes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]}};
  }
}
`, "service_config=true,envoy=true")
	if perr != "" {
		t.Fatal(perr)
	}
	sc := files["attack/dl/dl.service_config.json"]
	if strings.Contains(sc, "DEADLINE_EXCEEDED") {
		t.Errorf("the service config repeats after DEADLINE_EXCEEDED:\n%s", sc)
	}
	mcs := parseServiceConfig(t, sc)
	if mcs["attack.dl.S/Both"].RetryPolicy == nil || mcs["attack.dl.S/Only"].RetryPolicy != nil {
		t.Errorf("Both retried %v (want true, on UNAVAILABLE), Only retried %v (want false)",
			mcs["attack.dl.S/Both"].RetryPolicy != nil, mcs["attack.dl.S/Only"].RetryPolicy != nil)
	}
	if y := files["attack/dl/dl.envoy.yaml"]; strings.Contains(y, "deadline-exceeded") || !strings.Contains(y, "retry_on: gateway-error\n") {
		t.Errorf("Envoy retries the server's DEADLINE_EXCEEDED, or not an expired per_try_timeout:\n%s", y)
	}

	// A plain grpc-go client with the config, against a server that
	// answers DEADLINE_EXCEEDED itself: one call, as the generated client.
	srv, addr := startCountingServer(t)
	srv.set(codes.DeadlineExceeded, 0)
	cc := dialWithServiceConfig(t, addr, sc)
	for _, m := range []string{"Both", "Only"} {
		method := "/attack.dl.S/" + m
		err := cc.Invoke(context.Background(), method, new(emptypb.Empty), new(emptypb.Empty))
		if status.Code(err) != codes.DeadlineExceeded || srv.count(method) != 1 {
			t.Errorf("%s: %v after %d calls; want the server's DEADLINE_EXCEEDED after 1", m, err, srv.count(method))
		}
	}
}

// TestAttackInheritedRepeats: repeats written on the file or the service
// reach the exports only for methods any caller may repeat: hedging there
// is refused, a file's key field that a request lacks is refused, a
// service's generated key exports no retry at all, and a service's
// idempotent: true exports retries for its unary methods, not its stream.
func TestAttackInheritedRepeats(t *testing.T) {
	const head = `syntax = "proto3";
package attack.inh;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/inh";
message Keyed { string op_id = 1; }
%s
service S {
  %s
  rpc W(Keyed) returns (google.protobuf.Empty) {}
  rpc P(google.protobuf.Empty) returns (google.protobuf.Empty) {}
  rpc St(stream Keyed) returns (stream google.protobuf.Empty) {}
}
`
	for _, tc := range []struct {
		file, svc, refusal string
		retried            []string
	}{
		{`option (resilient.v1.file) = {hedging: {delay: {nanos: 1000}}};`, ``, "inh.proto:7:1: attack.inh: (resilient.v1.file).hedging: hedging is decided method by method", nil},
		{``, `option (resilient.v1.service) = {hedging: {delay: {nanos: 1000}}};`, "inh.proto:9:3: attack.inh.S: (resilient.v1.service).hedging: hedging is decided method by method", nil},
		{`option (resilient.v1.file) = {idempotency_key: "op_id", retry: {}};`, ``, `inh.proto:7:1: attack.inh.S.P: (resilient.v1.file).idempotency_key: field "op_id" does not exist in google.protobuf.Empty`, nil},
		{``, `option (resilient.v1.service) = {generate_idempotency_key: true, retry: {}};`, "", nil},
		{``, `option (resilient.v1.service) = {idempotent: true, retry: {}};`, "", []string{"W", "P"}},
	} {
		files, perr := attackProto(t, "inh.proto", fmt.Sprintf(head, tc.file, tc.svc), "service_config=true")
		if tc.refusal != "" {
			if !strings.HasPrefix(perr, tc.refusal) || len(files) != 0 {
				t.Errorf("%s%s: got %q, want %q", tc.file, tc.svc, perr, tc.refusal)
			}
			continue
		}
		if perr != "" {
			t.Fatalf("%s%s: %s", tc.file, tc.svc, perr)
		}
		mcs := parseServiceConfig(t, files["attack/inh/inh.service_config.json"])
		var retried []string
		for _, m := range []string{"W", "P", "St"} {
			if mc := mcs["attack.inh.S/"+m]; mc.RetryPolicy != nil || mc.HedgingPolicy != nil {
				retried = append(retried, m)
			}
		}
		if strings.Join(retried, ",") != strings.Join(tc.retried, ",") {
			t.Errorf("%s: the service config repeats %v, want %v", tc.svc, retried, tc.retried)
		}
	}
}
