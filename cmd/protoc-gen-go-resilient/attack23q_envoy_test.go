// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestAttack23qEnvoyFilesOfOnePackageDoNotClash: two files of one package
// (testdata/attack23q). Their RouteConfigurations were both named after the
// package, with a virtual host of that name too: merged into one RDS file,
// two resources of one name, of which an xDS server serves one and the
// other's routes are lost. Each is now named after its file, whether the
// two are generated in one request (buf's strategy: directory) or each in
// its own (protoc run per file), with the same output. envoytest merges
// the two goldens and validates them with go-control-plane
// (TestAttack23qEnvoyMergedPackage).
func TestAttack23qEnvoyFilesOfOnePackageDoNotClash(t *testing.T) {
	files := []string{"attack23q/orders.proto", "attack23q/payments.proto"}
	gen := func(paths ...string) map[string]string {
		req := compileRequest(t, "module="+testModule+",envoy=true", []string{"testdata", "../../options"}, paths...)
		resp := runPluginParams(t, req)
		if resp.Error != nil {
			t.Fatalf("plugin error:\n%s", resp.GetError())
		}
		out := map[string]string{}
		for _, f := range resp.File {
			out[f.GetName()] = f.GetContent()
		}
		return out
	}
	together := gen(files...)
	names := regexp.MustCompile(`(?m)^  name: (.*)$|^  - name: (.*)$`)
	seen := map[string]string{}
	for _, tc := range []struct{ proto, out, golden, route string }{
		{files[0], "attack23q/shop/orders.envoy.yaml", "attack23q_orders.envoy.yaml", "attack23q/orders.proto"},
		{files[1], "attack23q/shop/payments.envoy.yaml", "attack23q_payments.envoy.yaml", "attack23q/payments.proto"},
	} {
		y, ok := together[tc.out]
		if !ok {
			t.Fatalf("%s not written; got %v", tc.out, keys(together))
		}
		if alone := gen(tc.proto)[tc.out]; alone != y {
			t.Errorf("%s generated alone differs from %s generated with the other file of its package:\n%s\n---\n%s", tc.proto, tc.out, alone, y)
		}
		// The top-level resources' names (route configuration, clusters)
		// and the virtual host's: none shared between the two files.
		kind := ""
		for _, line := range strings.Split(y, "\n") {
			if t, ok := strings.CutPrefix(line, `- "@type": `); ok {
				kind = t
			}
			m := names.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name := kind + " " + m[1]
			if m[2] != "" {
				name = kind + " virtual host " + m[2]
			}
			if other, dup := seen[name]; dup {
				t.Errorf("%s names %q, as %s does: merged, the two clash", tc.out, name, other)
			}
			seen[name] = tc.out
		}
		for _, want := range []string{"\n  name: " + tc.route + "\n", "\n  - name: " + tc.route + "\n"} {
			if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(y) {
				t.Errorf("%s has no %q: the route configuration and its virtual host are named after the file", tc.out, want)
			}
		}
		checkGolden(t, tc.golden, y)
	}
}
