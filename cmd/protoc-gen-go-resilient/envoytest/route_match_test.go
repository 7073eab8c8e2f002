// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package envoytest

import (
	"os"
	"regexp"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// routesOf parses an Envoy output into go-control-plane's types and
// returns the routes of its one virtual host, in order.
func routesOf(t *testing.T, file string) []*routev3.Route {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var resp discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(js, &resp); err != nil {
		t.Fatal(err)
	}
	for _, res := range resp.GetResources() {
		m, err := res.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if rc, ok := m.(*routev3.RouteConfiguration); ok {
			return rc.GetVirtualHosts()[0].GetRoutes()
		}
	}
	t.Fatalf("%s has no RouteConfiguration", file)
	return nil
}

// match is Envoy's choice of a route for a gRPC request: the first route,
// in order, whose matcher accepts it. It implements the matchers the plugin
// writes (path, grpc, a header's value by safe_regex) and fails the test on any other,
// so that it cannot pass by ignoring a condition.
func match(t *testing.T, routes []*routev3.Route, path string, headers map[string]string) *routev3.Route {
	t.Helper()
	for _, r := range routes {
		m := r.GetMatch()
		rest := proto.Clone(m).(*routev3.RouteMatch)
		rest.PathSpecifier, rest.Grpc, rest.Headers = nil, nil, nil
		if proto.Size(rest) != 0 {
			t.Fatalf("route %s: the test's matcher does not implement %v", r.GetName(), rest)
		}
		if m.GetPath() != path || m.GetGrpc() == nil {
			continue
		}
		ok := true
		for _, h := range m.GetHeaders() {
			re := h.GetStringMatch().GetSafeRegex().GetRegex()
			rest := proto.Clone(h).(*routev3.HeaderMatcher)
			rest.Name, rest.HeaderMatchSpecifier = "", nil
			if re == "" || proto.Size(rest) != 0 || proto.Size(h.GetStringMatch()) != proto.Size(&matcherv3.StringMatcher{MatchPattern: h.GetStringMatch().GetMatchPattern()}) {
				t.Fatalf("route %s: the test's matcher implements string_match.safe_regex only, got %v", r.GetName(), h)
			}
			// Envoy's safe_regex is RE2 and matches the whole value; a
			// header that is absent matches no string_match.
			v, present := headers[h.GetName()]
			if !present || !regexp.MustCompile(`^(?:`+re+`)$`).MatchString(v) {
				ok = false
			}
		}
		if ok {
			return r
		}
	}
	return nil
}

// TestKeyedMethodsRetriedOnlyWithKey checks, on the routes as Envoy reads
// them, that a method safe to retry only with its idempotency key is
// retried for a request that carries the key and sent once for one that
// does not; an idempotent method is retried either way; and with
// envoy_retries=client no route retries.
func TestKeyedMethodsRetriedOnlyWithKey(t *testing.T) {
	withKey := map[string]string{"idempotency-key": "order-7"}
	emptyKey := map[string]string{"idempotency-key": ""}
	files := []struct {
		file     string
		envoy    bool // envoy_retries=envoy
		keyed    []string
		idempPth string
	}{
		{"../testdata/golden/export.envoy.yaml.golden", true, []string{"/resilienttest.export.Orders/Reserve", "/resilienttest.export.Orders/Pay"}, "/resilienttest.export.Orders/Get"},
		{"../testdata/golden/export.envoy_client.yaml.golden", false, []string{"/resilienttest.export.Orders/Reserve", "/resilienttest.export.Orders/Pay"}, "/resilienttest.export.Orders/Get"},
		{"../../../example/gen/example/inventory/v1/inventory.envoy.yaml", true, []string{"/example.inventory.v1.InventoryService/ReserveStock"}, "/example.inventory.v1.InventoryService/GetStock"},
	}
	for _, tc := range files {
		routes := routesOf(t, tc.file)
		for _, path := range append(tc.keyed, tc.idempPth) {
			keyless := match(t, routes, path, nil)
			// An empty key is no key: it goes where a request without one goes.
			if empty := match(t, routes, path, emptyKey); empty != keyless {
				t.Errorf("%s: %s with an empty idempotency-key goes to route %q, without one to %q", tc.file, path, empty.GetName(), keyless.GetName())
			}
			keyed := match(t, routes, path, withKey)
			if keyless == nil || keyed == nil {
				t.Fatalf("%s: %s matches no route (with the key: %v, without: %v)", tc.file, path, keyed != nil, keyless != nil)
			}
			idempotent := path == tc.idempPth
			if got := keyless.GetRoute().GetRetryPolicy() != nil; got != (tc.envoy && idempotent) {
				t.Errorf("%s: %s without idempotency-key goes to route %q, retried %v; want retried %v", tc.file, path, keyless.GetName(), got, tc.envoy && idempotent)
			}
			if got := keyed.GetRoute().GetRetryPolicy() != nil; got != tc.envoy {
				t.Errorf("%s: %s with idempotency-key goes to route %q, retried %v; want %v", tc.file, path, keyed.GetName(), got, tc.envoy)
			}
			if !idempotent && tc.envoy {
				if keyed == keyless {
					t.Errorf("%s: %s: the same route with and without the key", tc.file, path)
				}
				// The keyless call is one attempt: its route's timeout is
				// not the keyed one's retries and backoffs.
				if k, n := keyed.GetRoute().GetTimeout().AsDuration(), keyless.GetRoute().GetTimeout().AsDuration(); n > k {
					t.Errorf("%s: %s: the keyless route's timeout %v exceeds the retried one's %v", tc.file, path, n, k)
				}
			}
		}
	}
}
