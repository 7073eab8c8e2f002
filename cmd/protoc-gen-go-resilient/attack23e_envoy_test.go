// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

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
