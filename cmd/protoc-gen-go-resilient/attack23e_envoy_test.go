// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
)

// attack23eOddSrc is a service whose file may be given any path.
const attack23eOddSrc = `syntax = "proto3";
package attack23e.odd;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack23e/odd";
service S {
  option (resilient.v1.service) = {timeout: {nanos: 200000000}, circuit_breaker: {failure_ratio: 0.5, minimum_calls: 10}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {max_attempts: 3}};
  }
}
`

// TestAttack23eEnvoyNameOfAnyFilePathGolden: since 61de68e the route
// configuration and its virtual host are named after the file's path,
// which, unlike a package name, may hold what YAML reads otherwise. It was
// written unquoted: "orders #2.proto" named both "orders" (the rest a
// comment), "!x.proto" was a tag and an empty name, and "a: b.proto",
// "@x.proto", "*x.proto", "%x.proto", "[x].proto" or "{x}.proto" made a
// file that is no YAML at all. Every path now reads back as itself; a
// usual one (letters, digits, "_", ".", "/", "-", ending in .proto) is
// still written plain. The golden of one such file is validated by
// envoytest with go-control-plane, as every Envoy golden is.
func TestAttack23eEnvoyNameOfAnyFilePathGolden(t *testing.T) {
	for _, path := range []string{"orders #2.proto", "!x.proto", "a: b.proto", "@x.proto", "*x.proto", "%x.proto",
		"[x].proto", "{x}.proto", "-x.proto", `x"y\z.proto`, "x'y.proto", "true", "null", "1.5", "x.proto", "v1/shop-2/x_y.proto"} {
		files, perr := attackProto(t, path, attack23eOddSrc, "envoy=true")
		if perr != "" {
			t.Fatalf("%q: %s", path, perr)
		}
		var y string
		for name, content := range files {
			if strings.HasSuffix(name, ".envoy.yaml") {
				y = content
			}
		}
		if y == "" {
			t.Fatalf("%q: no Envoy file in %v", path, keys(files))
		}
		var parsed struct {
			Resources []struct {
				Name         string
				VirtualHosts []struct{ Name string } `yaml:"virtual_hosts"`
			}
		}
		if err := yaml.Unmarshal([]byte(y), &parsed); err != nil {
			t.Errorf("%q: the Envoy file is not YAML: %v", path, err)
			continue
		}
		rc := parsed.Resources[0]
		if rc.Name != path || len(rc.VirtualHosts) != 1 || rc.VirtualHosts[0].Name != path {
			t.Errorf("%q: the route configuration is named %q, its virtual hosts %v: want both named %q", path, rc.Name, rc.VirtualHosts, path)
		}
		plain := "\n  name: " + path + "\n"
		if usual := path == "x.proto" || path == "v1/shop-2/x_y.proto"; usual != strings.Contains(y, plain) {
			t.Errorf("%q: written plain %v, want %v", path, !usual, usual)
		}
		if path == "orders #2.proto" {
			checkGolden(t, "attack23e_oddpath.envoy.yaml", y)
		}
	}
}

// TestAttack23eEnvoyFractionsRoundedUp: Envoy reads a route's timeout,
// per_try_timeout, max_stream_duration and outlier_detection's intervals
// in whole milliseconds, truncated, and admission_control's
// sampling_window in whole seconds, truncated. Since 0c3c1e9 a timeout
// below 1ms was written as 1ms, but one of 1.5ms was still 0.001500s,
// which Envoy cut at 1ms where the Go client lets the attempt run 1.5ms;
// a retried route bounded 3 attempts of 1.2ms as 0.043600s (3.6ms and the
// back-offs), while each of Envoy's attempts runs its 2ms per_try_timeout;
// an adaptive_limit baseline_window of 1.5ms an interval of 1ms;
// and a client_throttle window of 250ms (the README's example) was a
// sampling_window of 0.250s, which Envoy reads as 0s, no history at all.
// Each is now rounded up to what Envoy keeps, with a comment: 2ms, 3 × 2ms
// and the back-offs, 1s; a whole millisecond (a whole second) is written
// as it is.
func TestAttack23eEnvoyFractionsRoundedUp(t *testing.T) {
	src := `syntax = "proto3";
package attack23e.frac;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack23e/frac";
service S {
  option (resilient.v1.service) = {
    circuit_breaker: {failure_ratio: 0.5, minimum_calls: 10, window: {nanos: 1500000}, cool_down: {nanos: 2000100}}
    client_throttle: {k: 2, window: {nanos: 250000000}}
  };
  rpc Get(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1500000}};
  }
  rpc List(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1200000}, retry: {max_attempts: 3, initial_backoff: {nanos: 10000000}}};
  }
  rpc Overall(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 1000000}, overall_timeout: {nanos: 2500000}, retry: {max_attempts: 2}};
  }
  rpc Upload(stream M) returns (M) {
    option (resilient.v1.method) = {timeout: {nanos: 1500000}};
  }
}
service Whole {
  option (resilient.v1.service) = {
    circuit_breaker: {failure_ratio: 0.5, minimum_calls: 10, window: {nanos: 2000000}, cool_down: {seconds: 1}}
    client_throttle: {k: 2, window: {seconds: 2}}
  };
  rpc Get(M) returns (M) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: {nanos: 2000000}};
  }
}
service Long {
  option (resilient.v1.service) = {client_throttle: {k: 2, window: {seconds: 1, nanos: 500000000}}, adaptive_limit: {baseline_window: {nanos: 1500000}}, timeout: {seconds: 1}};
  rpc Get(M) returns (M) {}
}
message M {}
`
	has := func(t *testing.T, what, text string, wants ...string) {
		t.Helper()
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("%s: no %q in:\n%s", what, want, text)
			}
		}
	}
	for _, params := range []string{"envoy=true", "envoy=true,envoy_retries=client"} {
		files, perr := attackProto(t, "frac.proto", src, params)
		if perr != "" {
			t.Fatal(perr)
		}
		y := files["attack23e/frac/frac.envoy.yaml"]
		if strings.Contains(y, "00s") {
			t.Errorf("%s: a duration of a fraction of a millisecond, which Envoy truncates:\n%s", params, y)
		}
		has(t, params+" Get", envoyRouteOf(t, y, "attack23e.frac.S/Get"),
			"\n        # 1.5ms rounded up to 2ms: Envoy reads its timeouts in whole milliseconds, truncated, and 0 would be none\n",
			"\n        timeout: 0.002s #", "grpc_timeout_header_max: 0.002s #")
		if params == "envoy=true" {
			// Not 3ms: the call may not outlast its overall_timeout of
			// 2.5ms (TestAttack24fEnvoyRoundingKeepsTheOverallBound).
			has(t, params+" Overall", envoyRouteOf(t, y, "attack23e.frac.S/Overall"), "\n        timeout: 0.002s # overall_timeout\n", "grpc_timeout_header_max: 0.002s #")
		}
		has(t, params+" Upload", envoyRouteOf(t, y, "attack23e.frac.S/Upload"), "\n          max_stream_duration: 0.002s #")
		has(t, params+" Whole", envoyRouteOf(t, y, "attack23e.frac.Whole/Get"), "\n        timeout: 0.002s #")
		list := envoyRouteOf(t, y, "attack23e.frac.S/List")
		if params == "envoy=true" {
			// 3 attempts of Envoy's 2ms, and its back-offs of 10ms and 30ms.
			has(t, params+" List", list, "\n        timeout: 0.046s # 3 attempts of 1.2ms and the backoffs between them\n",
				"per_try_timeout: 0.002s # timeout 1.2ms rounded up")
		} else {
			has(t, params+" List", list, "\n        timeout: 0.002s # timeout, of one attempt: the callers retry\n")
		}
		has(t, params+" clusters", y,
			"\n    interval: 0.002s # window 1.5ms, rounded up: Envoy reads it in whole milliseconds\n",
			"\n    base_ejection_time: 0.003s # cool_down 2.0001ms, rounded up: Envoy reads it in whole milliseconds\n",
			"\n    interval: 0.002s # window\n", "\n    base_ejection_time: 1s # cool_down\n",
			"\n    sampling_window: 1s # window 250ms, rounded up: Envoy reads it in whole seconds, truncated, and 0 would keep no history\n",
			"\n    sampling_window: 2s # window\n",
			"\n        interval: 0.002s # baseline_window 1.5ms, rounded up: Envoy reads it in whole milliseconds: Envoy measures its baseline again each interval, at min_concurrency\n",
			"\n    sampling_window: 2s # window 1.5s, rounded up: Envoy reads it in whole seconds, truncated, and 0 would keep no history\n")
	}
}

// TestAttack23eEnvoyRoundingAtTheEdges: envoyMillis and envoySeconds at
// their edges: nothing, exact units, one nanosecond over, and the longest
// Duration (which saturated bounds reach), left as it is rather than
// overflowing to a negative timeout.
func TestAttack23eEnvoyRoundingAtTheEdges(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		in, ms, s time.Duration
	}{
		{0, 0, 0},
		{1, time.Millisecond, time.Second},
		{999 * time.Microsecond, time.Millisecond, time.Second},
		{time.Millisecond, time.Millisecond, time.Second},
		{time.Millisecond + 1, 2 * time.Millisecond, time.Second},
		{time.Second, time.Second, time.Second},
		{time.Second + 1, time.Second + time.Millisecond, 2 * time.Second},
		{maxD, maxD, maxD},
		{maxD - 2*time.Second, maxD - 2*time.Second - maxD%time.Millisecond + time.Millisecond, maxD - 2*time.Second - maxD%time.Second + time.Second},
		{maxD - time.Hour - maxD%time.Hour + 1, maxD - time.Hour - maxD%time.Hour + time.Millisecond, maxD - time.Hour - maxD%time.Hour + time.Second},
	} {
		if got := envoyMillis(tc.in); got != tc.ms {
			t.Errorf("envoyMillis(%v) = %v, want %v", tc.in, got, tc.ms)
		}
		if got := envoySeconds(tc.in); got != tc.s {
			t.Errorf("envoySeconds(%v) = %v, want %v", tc.in, got, tc.s)
		}
	}
}
