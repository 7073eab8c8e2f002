// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package envoytest checks the Envoy settings the plugin writes against
// Envoy's own types. It is a module of its own so that the plugin and its
// users never inherit go-control-plane.
package envoytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	adaptivev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/adaptive_concurrency/v3"
	admissionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/admission_control/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

// envoyFiles are the plugin's Envoy outputs checked in by the golden tests
// of the plugin and by the example's buf generate.
func envoyFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{
		"../testdata/golden/*envoy*.golden",
		"../../../example/gen/example/*/v1/*.envoy.yaml",
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	return files
}

// TestEnvoyTypes parses every Envoy output into Envoy's own types, refusing
// unknown fields, and runs their validation rules.
func TestEnvoyTypes(t *testing.T) {
	for _, file := range envoyFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatalf("not YAML: %v", err)
			}
			var resp discoveryv3.DiscoveryResponse
			if err := (protojson.UnmarshalOptions{}).Unmarshal(js, &resp); err != nil {
				t.Fatalf("not Envoy's types: %v", err)
			}
			var routes, clusters, filters int
			for _, res := range resp.GetResources() {
				m, err := res.UnmarshalNew()
				if err != nil {
					t.Fatal(err)
				}
				if v, ok := m.(interface{ ValidateAll() error }); ok {
					if err := v.ValidateAll(); err != nil {
						t.Errorf("%T refused by Envoy's validation: %v", m, err)
					}
				}
				switch r := m.(type) {
				case *routev3.RouteConfiguration:
					routes++
					for _, vh := range r.GetVirtualHosts() {
						for _, rt := range vh.GetRoutes() {
							if rt.GetRoute().GetTimeout() == nil {
								t.Errorf("route %s has no timeout (Envoy would apply its default of 15 s)", rt.GetName())
							}
							if rp := rt.GetRoute().GetRetryPolicy(); rp != nil && rp.GetRetryOn() == "" {
								t.Errorf("route %s retries on nothing", rt.GetName())
							}
						}
					}
				case *clusterv3.Cluster:
					clusters++
				case *hcmv3.HttpFilter:
					filters++
					checkFilter(t, r)
				default:
					t.Errorf("unexpected resource %T", m)
				}
			}
			if strings.HasPrefix(filepath.Base(file), "adaptive") && filters != 2 {
				t.Errorf("got %d HTTP filters, want the adaptive concurrency and the admission control filters", filters)
			}
			if routes != 1 || clusters == 0 {
				t.Errorf("got %d route configurations and %d clusters, want 1 and at least 1", routes, clusters)
			}
		})
	}
}

// TestEnvoyUnknownFieldRefused checks that the parse above would catch a
// misspelt field.
func TestEnvoyUnknownFieldRefused(t *testing.T) {
	js, err := yaml.YAMLToJSON([]byte(`resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: x
  circuit_breakers: {thresholds: [{max_request: 1}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(js, new(discoveryv3.DiscoveryResponse)); err == nil {
		t.Error("max_request (for max_requests) was accepted")
	}
}

// checkFilter unpacks an HTTP filter's typed config, runs Envoy's
// validation on it, and checks that the filter's name is the one Envoy
// registers its config type under.
func checkFilter(t *testing.T, f *hcmv3.HttpFilter) {
	t.Helper()
	cfg, err := f.GetTypedConfig().UnmarshalNew()
	if err != nil {
		t.Fatalf("filter %s: %v", f.GetName(), err)
	}
	if v, ok := cfg.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("filter %s: %T refused by Envoy's validation: %v", f.GetName(), cfg, err)
		}
	}
	want := map[string]string{
		"envoy.filters.http.adaptive_concurrency": "*adaptive_concurrencyv3.AdaptiveConcurrency",
		"envoy.filters.http.admission_control":    "*admission_controlv3.AdmissionControl",
	}[f.GetName()]
	switch c := cfg.(type) {
	case *adaptivev3.AdaptiveConcurrency:
		if f.GetName() != "envoy.filters.http.adaptive_concurrency" {
			t.Errorf("filter %s holds an AdaptiveConcurrency", f.GetName())
		}
		g := c.GetGradientControllerConfig()
		if g.GetConcurrencyLimitParams().GetMaxConcurrencyLimit().GetValue() < g.GetConcurrencyLimitParams().GetMinConcurrencyLimit().GetValue() {
			t.Errorf("max concurrency limit below the min: %v", g)
		}
	case *admissionv3.AdmissionControl:
		if f.GetName() != "envoy.filters.http.admission_control" {
			t.Errorf("filter %s holds an AdmissionControl", f.GetName())
		}
		for _, code := range c.GetSuccessCriteria().GetGrpcCriteria().GetGrpcSuccessStatus() {
			if code == 4 || code == 8 || code == 14 {
				t.Errorf("admission control counts code %d, an overload, as a success", code)
			}
		}
	default:
		t.Errorf("filter %s: unexpected config %T (want %s)", f.GetName(), cfg, want)
	}
}
