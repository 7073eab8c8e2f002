// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// The attacks of round 18 on the rebuilt checks of the options: a value
// is checked at its level filled over the contract's defaults
// (checkValues), and what involves two values waits for the merged
// levels (CheckService, CheckMethod, CheckShedding). So a value right once
// merged must never be refused at its level, and a value wrong in force
// must be refused though each level alone is right. CheckFile is the pass
// the plugin and the lint plugin both make.

// attackPolicy parses a policy written as in a .proto option's braces; ""
// is no option.
func attackPolicy(t *testing.T, text string) *resilientv1.Policy {
	t.Helper()
	if text == "" {
		return nil
	}
	p := &resilientv1.Policy{}
	if err := prototext.Unmarshal([]byte(text), p); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return p
}

// attackFile builds a file with one service of two methods, Get (unary)
// and Watch (server-streaming), carrying the options file, service, get
// and watch (each "" for none), as protoc would hand it over.
func attackFile(t *testing.T, file, service, get, watch string) protoreflect.FileDescriptor {
	t.Helper()
	fileOpts := &descriptorpb.FileOptions{GoPackage: proto.String("atk/atk;atk")}
	svcOpts := &descriptorpb.ServiceOptions{}
	getOpts := &descriptorpb.MethodOptions{}
	watchOpts := &descriptorpb.MethodOptions{}
	for _, o := range []struct {
		msg  proto.Message
		xt   protoreflect.ExtensionType
		text string
	}{{fileOpts, resilientv1.E_File, file}, {svcOpts, resilientv1.E_Service, service}, {getOpts, resilientv1.E_Method, get}, {watchOpts, resilientv1.E_Method, watch}} {
		if p := attackPolicy(t, o.text); p != nil {
			proto.SetExtension(o.msg, o.xt, p)
		}
	}
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("atk/atk.proto"),
		Package: proto.String("atk"),
		Syntax:  proto.String("proto3"),
		Options: fileOpts,
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Req"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("request_id"), Number: proto.Int32(1), Type: str, Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("requestId")},
			}},
			{Name: proto.String("Resp")},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name:    proto.String("Svc"),
			Options: svcOpts,
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Get"), InputType: proto.String(".atk.Req"), OutputType: proto.String(".atk.Resp"), Options: getOpts},
				{Name: proto.String("Watch"), InputType: proto.String(".atk.Req"), OutputType: proto.String(".atk.Resp"), ServerStreaming: proto.Bool(true), Options: watchOpts},
			},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// attackFindings runs CheckFile, the plugin's and the lint plugin's pass,
// and returns its findings as "descriptor: (level).path: message", the
// lint-only RESILIENT_NO_TIMEOUT left out.
func attackFindings(t *testing.T, file, service, get, watch string) []string {
	t.Helper()
	var out []string
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("file {%s} service {%s} Get {%s} Watch {%s}: CheckFile panicked: %v", file, service, get, watch, r)
			}
		}()
		CheckFile(attackFile(t, file, service, get, watch), func(d protoreflect.Descriptor, f Finding) {
			if f.Rule != RuleNoTimeout {
				out = append(out, fmt.Sprintf("%s: %s.%s: %s", d.FullName(), f.Level.Option(), f.Path, f.Message))
			}
		})
	}()
	return out
}

// TestAttackR18ChecksMergedRightNotRefusedAtLevel: a value that is wrong
// only against the contract's defaults of another value, which another
// level sets to fit, is accepted: the level's check fills the defaults
// and must not refuse it (the pair waits for the merged levels).
func TestAttackR18ChecksMergedRightNotRefusedAtLevel(t *testing.T) {
	const keyed = `idempotent: true`
	for _, tc := range []struct{ file, service, get string }{
		// max_backoff below the default initial_backoff 50ms.
		{`timeout {seconds: 1} retry {max_backoff {nanos: 10000000}}`, ``, keyed + ` retry {initial_backoff {nanos: 5000000}}`},
		{`timeout {seconds: 1} retry {max_backoff {nanos: 10000000}}`, `retry {initial_backoff {nanos: 5000000}}`, keyed},
		// initial_backoff above the default max_backoff 1s.
		{`timeout {seconds: 1} retry {initial_backoff {seconds: 2}}`, `retry {max_backoff {seconds: 5}}`, keyed},
		{`timeout {seconds: 1}`, `retry {initial_backoff {seconds: 2}}`, keyed + ` retry {max_backoff {seconds: 5}}`},
		// window_calls below the default minimum_calls 20.
		{`timeout {seconds: 1} circuit_breaker {window_calls: 10}`, `circuit_breaker {minimum_calls: 5}`, keyed},
		{`timeout {seconds: 1} circuit_breaker {minimum_calls: 5}`, `circuit_breaker {window_calls: 10}`, keyed},
		{`timeout {seconds: 1} circuit_breaker {window_calls: 1}`, `circuit_breaker {minimum_calls: 1}`, keyed},
		// An adaptive limit's bounds against the defaults 1 and 100.
		{`timeout {seconds: 1} adaptive_limit {initial_limit: 150}`, `adaptive_limit {max_limit: 200}`, keyed},
		{`timeout {seconds: 1} adaptive_limit {min_limit: 150}`, `adaptive_limit {max_limit: 200}`, keyed},
		{`timeout {seconds: 1} adaptive_limit {max_limit: 5}`, `adaptive_limit {min_limit: 3 initial_limit: 4}`, keyed},
		// The limit's ceiling follows the bulkhead's permits.
		{`timeout {seconds: 1} adaptive_limit {}`, `bulkhead {permits: 1}`, keyed},
		{`timeout {seconds: 1} bulkhead {permits: 2}`, ``, keyed + ` bulkhead {per_method: true permits: 8} adaptive_limit {per_method: true min_limit: 5}`},
		// Shedding limits split over two levels.
		{`shedding {low: 100}`, `shedding {normal: 150 high: 180 critical: 200}`, ``},
		{`shedding {low: 500 normal: 600 high: 700 critical: 800}`, `shedding {low: 10}`, ``},
		// default_timeout below min_deadline, the other level's.
		{`server {min_deadline {seconds: 2}}`, ``, `server {default_timeout {seconds: 3}}`},
		{`server {default_timeout {seconds: 1}}`, `server {min_deadline {nanos: 500000000}}`, ``},
		// A burst without its rate, the rate set elsewhere.
		{`timeout {seconds: 1} rate_limit {burst: 1}`, `rate_limit {requests_per_second: 0.5}`, keyed},
		// A method's own breaker counting fewer calls than the shared minimum.
		{`timeout {seconds: 1} circuit_breaker {window_calls: 50 minimum_calls: 10}`, ``, keyed + ` circuit_breaker {per_method: true minimum_calls: 40}`},
		// Overall timeout at one level, timeout at another.
		{`overall_timeout {seconds: 1}`, ``, keyed + ` timeout {nanos: 500000000}`},
	} {
		if got := attackFindings(t, tc.file, tc.service, tc.get, `timeout {seconds: 1}`); len(got) > 0 {
			t.Errorf("file {%s} service {%s} Get {%s}: right once merged, refused:\n%s", tc.file, tc.service, tc.get, strings.Join(got, "\n"))
		}
	}
}

// TestAttackR18ChecksWrongInForceRefused: each level alone is right, the
// merged policy is not: it is refused, at the value of the more specific
// level that made it so.
func TestAttackR18ChecksWrongInForceRefused(t *testing.T) {
	const keyed = `idempotent: true`
	for _, tc := range []struct {
		file, service, get string
		want               string // "descriptor: (level).path", the start of the finding
	}{
		{`timeout {seconds: 1} retry {initial_backoff {seconds: 2}}`, ``, keyed + ` retry {max_backoff {seconds: 1}}`, "atk.Svc.Get: (resilient.v1.method).retry.max_backoff: "},
		{`timeout {seconds: 1} retry {max_backoff {nanos: 10000000}}`, ``, keyed + ` retry {initial_backoff {nanos: 20000000}}`, "atk.Svc.Get: (resilient.v1.method).retry.initial_backoff: "},
		{`overall_timeout {seconds: 1}`, ``, keyed + ` timeout {seconds: 2}`, "atk.Svc.Get: (resilient.v1.method).timeout: "},
		{`timeout {seconds: 2}`, `overall_timeout {seconds: 1}`, keyed, "atk.Svc.Get: (resilient.v1.service).overall_timeout: "},
		{`timeout {seconds: 1} circuit_breaker {minimum_calls: 100}`, `circuit_breaker {window_calls: 50}`, keyed, "atk.Svc: (resilient.v1.service).circuit_breaker.window_calls: "},
		{`timeout {seconds: 1} adaptive_limit {max_limit: 5}`, `adaptive_limit {min_limit: 10}`, keyed, "atk.Svc: (resilient.v1.service).adaptive_limit.min_limit: "},
		{`timeout {seconds: 1} adaptive_limit {min_limit: 10}`, `adaptive_limit {max_limit: 5}`, keyed, "atk.Svc: (resilient.v1.service).adaptive_limit.max_limit: "},
		{`timeout {seconds: 1} bulkhead {permits: 2}`, `adaptive_limit {min_limit: 3}`, keyed, "atk.Svc: (resilient.v1.service).adaptive_limit.min_limit: "},
		{`timeout {seconds: 1} adaptive_limit {initial_limit: 30}`, `adaptive_limit {max_limit: 20}`, keyed, "atk.Svc: (resilient.v1.file).adaptive_limit.initial_limit: "},
		{`server {min_deadline {seconds: 2}}`, ``, `server {default_timeout {seconds: 1}}`, "atk.Svc.Get: (resilient.v1.method).server.default_timeout: "},
		{`timeout {seconds: 1} idempotency_key: "request_id"`, ``, `generate_idempotency_key: true`, "atk.Svc.Get: (resilient.v1.method).generate_idempotency_key: "},
		{`timeout {seconds: 1}`, ``, keyed + ` hedging {delay {seconds: 2}} retry {max_attempts: 1}`, "atk.Svc.Get: (resilient.v1.method).hedging.delay: "},
		{`timeout {seconds: 1} retry {max_attempts: 3}`, ``, keyed + ` hedging {delay {nanos: 1000000}}`, "atk.Svc.Get: (resilient.v1.method).hedging: "},
	} {
		got := attackFindings(t, tc.file, tc.service, tc.get, `timeout {seconds: 1}`)
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, tc.want)
		}
		if !found {
			t.Errorf("file {%s} service {%s} Get {%s}: want a finding starting %q, got:\n%s", tc.file, tc.service, tc.get, tc.want, strings.Join(got, "\n"))
		}
	}
}

// TestAttackR18ChecksCountWindowBesideTimeWindowAcrossLevels: the option
// table says window_calls is "not with window", and Check refuses the two
// written side by side; written at two levels, both are in force on the
// merged breaker and the time window is silently ignored (the policy page
// marks it ignored). An author who sets window at the service over a
// file's window_calls gets no word that it does nothing.
func TestAttackR18ChecksCountWindowBesideTimeWindowAcrossLevels(t *testing.T) {
	got := attackFindings(t, `timeout {seconds: 1} circuit_breaker {window_calls: 50}`, `circuit_breaker {window {seconds: 5}}`, `idempotent: true`, ``)
	for _, g := range got {
		if strings.Contains(g, "circuit_breaker.window") {
			return
		}
	}
	t.Errorf("window_calls (file) beside window (service) accepted: %q", got)
}

// TestAttackR18ChecksEachFindingOnce: on a grid of extreme values of every
// kind, at every level a group may be written, alone and over another
// level's value, CheckFile never panics and never reports the same
// finding twice at one place.
func TestAttackR18ChecksEachFindingOnce(t *testing.T) {
	durations := []string{`{seconds: 0}`, `{nanos: 1}`, `{seconds: -1}`, `{seconds: 1 nanos: -1}`, `{nanos: 1000000000}`, `{seconds: 9223372036}`, `{seconds: 315576000000}`, `{seconds: 1}`}
	counts := []string{`0`, `1`, `4294967295`, `2147483648`}
	numbers := []string{`0`, `-1`, `0.5`, `1`, `2`, `nan`, `inf`, `-inf`, `1e308`}
	codes := []string{`["OK"]`, `["BOGUS"]`, `["NOT_FOUND"]`, `["UNAVAILABLE", "UNAVAILABLE"]`, `["unavailable"]`}
	fields := map[string][]string{
		"timeout": durations, "overall_timeout": durations,
		"retry.max_attempts": counts, "retry.initial_backoff": durations, "retry.max_backoff": durations, "retry.backoff_multiplier": numbers, "retry.retryable_codes": codes,
		"retry_budget.ratio": numbers, "retry_budget.window": durations,
		"circuit_breaker.failure_ratio": numbers, "circuit_breaker.minimum_calls": counts, "circuit_breaker.window": durations, "circuit_breaker.window_calls": counts,
		"circuit_breaker.cool_down": durations, "circuit_breaker.half_open_probes": counts, "circuit_breaker.slow_call_threshold": durations, "circuit_breaker.failure_codes": codes,
		"bulkhead.permits": counts, "bulkhead.max_wait": durations,
		"rate_limit.requests_per_second": numbers, "rate_limit.burst": counts, "rate_limit.max_wait": durations,
		"adaptive_limit.min_limit": counts, "adaptive_limit.max_limit": counts, "adaptive_limit.initial_limit": counts,
		"adaptive_limit.tolerance": numbers, "adaptive_limit.smoothing": numbers, "adaptive_limit.baseline_window": durations,
		"client_throttle.k": numbers, "client_throttle.window": durations, "client_throttle.max_refusal": numbers,
		"server.min_deadline": durations, "server.default_timeout": durations,
		"server.dedup.ttl": durations, "server.dedup.lease": durations, "server.dedup.on_store_error": {`0`, `1`, `7`},
		"shedding.low": counts, "shedding.critical": counts, "shedding.pushback": durations, "shedding.code": {`"OK"`, `"BOGUS"`, `""`, `"NOT_FOUND"`},
		"hedging.delay": durations, "hedging.max_copies": counts, "hedging.non_fatal_codes": codes,
		"cache.fresh_ttl": durations, "cache.stale_ttl": durations, "cache.max_entries": counts, "cache.key_fields": {`["request_id", "request_id"]`, `["nope"]`},
		"priority": {`0`, `5`, `PRIORITY_HIGH`},
	}
	text := func(path, v string) string {
		parts := strings.Split(path, ".")
		s := parts[len(parts)-1] + ": " + v
		for i := len(parts) - 2; i >= 0; i-- {
			s = parts[i] + " {" + s + "}"
		}
		return s
	}
	n := 0
	for path, values := range fields {
		for _, v := range values {
			opt := text(path, v)
			for _, tc := range []struct{ file, service, get string }{
				{opt, ``, `idempotent: true`},
				{``, opt, `idempotent: true`},
				{``, ``, `idempotent: true idempotency_key: "request_id" ` + opt},
				{opt, opt, `idempotent: true ` + opt},
			} {
				n++
				got := attackFindings(t, tc.file, tc.service, tc.get, opt)
				seen := map[string]bool{}
				for _, g := range got {
					if seen[g] {
						t.Errorf("file {%s} service {%s} Get {%s}: reported twice: %s", tc.file, tc.service, tc.get, g)
					}
					seen[g] = true
				}
			}
		}
	}
	if n < 500 {
		t.Fatalf("only %d inputs tried", n)
	}
}

// TestAttackR18ChecksEveryGroupHasItsGoCheck: a group of the options with
// no row in groups would have its values filled nowhere and checked by
// nobody: every value accepted, whatever it is. Every message of the
// options under Policy, at any depth, but a Duration, has its row, and
// each row's Go value is one GroupProblems checks (a bad value of it is
// refused).
func TestAttackR18ChecksEveryGroupHasItsGoCheck(t *testing.T) {
	rows := map[string]bool{}
	for _, g := range groups {
		rows[g.path] = true
	}
	var visit func(md protoreflect.MessageDescriptor, prefix string)
	visit = func(md protoreflect.MessageDescriptor, prefix string) {
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			if fd.Message() == nil || fd.Message().FullName() == "google.protobuf.Duration" {
				continue
			}
			path := prefix + string(fd.Name())
			if !rows[path] {
				t.Errorf("the options group %s has no row in groups (values.go): its values are checked by nobody", path)
			}
			visit(fd.Message(), path+".")
		}
	}
	visit((&resilientv1.Policy{}).ProtoReflect().Descriptor(), "")
	for _, g := range groups {
		_, checked := g.value()
		if policy.GroupProblems(checked) == nil {
			t.Errorf("group %q: GroupProblems finds nothing in its zero value, as written (every count 0): its Go value %T has no case there", g.path, checked)
		}
	}
}
