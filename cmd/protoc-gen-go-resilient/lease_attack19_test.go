package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// attack19PluginAndLint runs the plugin and the lint rules on one .proto
// written by the test: the plugin's refusals without their positions, and
// lint's findings (the no-timeout warning, lint's alone, left out).
func attack19PluginAndLint(t *testing.T, src string) (plugin, lint []string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a19.proto"), []byte(src))
	req := compileRequest(t, "module="+testModule, []string{dir, "../../options"}, "a19.proto")
	if e := runPlugin(t, req).GetError(); e != "" {
		for _, line := range strings.Split(e, "\n") {
			_, rest, _ := strings.Cut(line, ": ")
			plugin = append(plugin, rest)
		}
	}
	lintFindings(t, req, func(d protoreflect.Descriptor, fi rules.Finding) {
		if fi.Rule != rules.RuleNoTimeout {
			lint = append(lint, fmt.Sprintf("%s: %s.%s: %s", d.FullName(), fi.Level.Option(), fi.Path, fi.Message))
		}
	})
	return plugin, lint
}

const attack19Head = `syntax = "proto3";
package a19;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a19;a19";
message Req { string request_id = 1; }
message Resp {}
`

// TestAttack19DedupLeaseBoundsAtEveryLevel: the dedup lease is held to
// [100 ms, 1 h] (README, server.dedup.lease row) wherever it is written
// (file, service, method), by the plugin and lint alike, with a message
// naming the value as written and the bound; the bounds themselves are
// accepted; a duration beyond what Go holds is refused as such, not as
// "at most 1h" of a wrapped value.
func TestAttack19DedupLeaseBoundsAtEveryLevel(t *testing.T) {
	for _, tc := range []struct {
		lease string
		want  string // "" accepted; else what the message says after the path
	}{
		{"{seconds: 3600}", ""},
		{"{seconds: 3599, nanos: 999999999}", ""},
		{"{nanos: 100000000}", ""},
		{"{seconds: 3600, nanos: 1}", "must be at most 1h0m0s, got 1h0m0.000000001s"},
		{"{seconds: 86400}", "must be at most 1h0m0s, got 24h0m0s"},
		{"{nanos: 99999999}", "must be at least 100ms, got 99.999999ms"},
		{"{}", "must be at least 100ms, got 0s"},
		{"{seconds: -1}", "must be at least 100ms, got -1s"},
		{"{nanos: -1}", "must be at least 100ms, got -1ns"},
		{"{seconds: 9223372035, nanos: 999999999}", "must be at most 1h0m0s, got 2562047h47m15.999999999s"},
		// The longest and the shortest Duration are durations, refused as leases
		// by their values; a nanosecond past either is not.
		{"{seconds: 9223372036}", "must be at most 1h0m0s, got 2562047h47m16s"},
		{"{seconds: 9223372036, nanos: 854775807}", "must be at most 1h0m0s, got 2562047h47m16.854775807s"},
		{"{seconds: 9223372036, nanos: 854775808}", "is not a valid duration: 9223372036 seconds and 854775808 nanos is more than a Go time.Duration holds"},
		{"{seconds: -9223372036, nanos: -854775808}", "must be at least 100ms, got -2562047h47m16.854775808s"},
		{"{seconds: -9223372036, nanos: -854775809}", "is not a valid duration: -9223372036 seconds and -854775809 nanos is more than a Go time.Duration holds"},
		{"{seconds: -9223372037}", "is not a valid duration: -9223372037 seconds is more than a Go time.Duration holds"},
		{"{seconds: 1, nanos: -1}", "is not a valid duration: seconds 1 and nanos -1 must have the same sign"},
	} {
		for _, level := range []string{"file", "service", "method"} {
			opt := `server: {dedup: {ttl: {seconds: 7200}, lease: ` + tc.lease + `}}`
			src, at := attack19Head, ""
			switch level {
			case "file":
				src += `option (resilient.v1.file) = {` + opt + `};
service S { rpc Put(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "request_id"}; } }`
				at = "a19: (resilient.v1.file).server.dedup.lease: "
			case "service":
				src += `service S { option (resilient.v1.service) = {` + opt + `};
  rpc Put(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "request_id"}; } }`
				at = "a19.S: (resilient.v1.service).server.dedup.lease: "
			default:
				src += `service S { rpc Put(Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "request_id", ` + opt + `}; } }`
				at = "a19.S.Put: (resilient.v1.method).server.dedup.lease: "
			}
			plugin, lint := attack19PluginAndLint(t, src)
			if !slices.Equal(plugin, lint) {
				t.Errorf("lease %s on the %s: the plugin refuses %q, lint finds %q", tc.lease, level, plugin, lint)
			}
			switch {
			case tc.want == "" && len(plugin) != 0:
				t.Errorf("lease %s on the %s refused: %q", tc.lease, level, plugin)
			case tc.want != "" && (len(plugin) != 1 || !strings.HasPrefix(plugin[0], at+tc.want)):
				t.Errorf("lease %s on the %s: %q; want one refusal starting %q", tc.lease, level, plugin, at+tc.want)
			}
		}
	}
}
