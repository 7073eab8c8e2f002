// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package envoytest

import (
	"os"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"
)

// resourcesOf parses an Envoy output into go-control-plane's types,
// refusing unknown fields, and returns its resources.
func resourcesOf(t *testing.T, file string) []*anypb.Any {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: not YAML: %v", file, err)
	}
	var resp discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(js, &resp); err != nil {
		t.Fatalf("%s: not Envoy's types: %v", file, err)
	}
	return resp.GetResources()
}

// TestAttack23qEnvoyMergedPackage: the Envoy outputs of two files of one
// package (the plugin's TestAttack23qEnvoyFilesOfOnePackageDoNotClash)
// merged into one configuration, as an operator merges them into one RDS
// and one CDS file. Every resource passes Envoy's validation, and no two
// resources of one type share a name (an xDS server keys its resources by
// type and name: of two RouteConfigurations named after the package, one
// was served and the other's routes lost). Their routes moved into one
// virtual host, to serve both services on one listener, make a valid
// RouteConfiguration too, with no route name or path twice.
func TestAttack23qEnvoyMergedPackage(t *testing.T) {
	var merged []*anypb.Any
	for _, f := range []string{"../testdata/golden/attack23q_orders.envoy.yaml.golden", "../testdata/golden/attack23q_payments.envoy.yaml.golden"} {
		merged = append(merged, resourcesOf(t, f)...)
	}
	// The merged file itself, through Envoy's types once more.
	js, err := protojson.Marshal(&discoveryv3.DiscoveryResponse{Resources: merged})
	if err != nil {
		t.Fatal(err)
	}
	var resp discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(js, &resp); err != nil {
		t.Fatalf("the merged configuration: %v", err)
	}

	seen := map[string]bool{}
	one := &routev3.RouteConfiguration{Name: "shop", VirtualHosts: []*routev3.VirtualHost{{Name: "shop", Domains: []string{"*"}}}}
	var routeConfigs, clusters int
	for _, res := range resp.GetResources() {
		m, err := res.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
			t.Errorf("%T refused by Envoy's validation: %v", m, err)
		}
		var name string
		switch r := m.(type) {
		case *routev3.RouteConfiguration:
			routeConfigs++
			name = r.GetName()
			domains := map[string]bool{}
			for _, vh := range r.GetVirtualHosts() {
				for _, d := range vh.GetDomains() {
					if domains[d] {
						t.Errorf("route configuration %s: domain %q in two virtual hosts", name, d)
					}
					domains[d] = true
				}
				one.VirtualHosts[0].Routes = append(one.VirtualHosts[0].Routes, vh.GetRoutes()...)
			}
		case *clusterv3.Cluster:
			clusters++
			name = r.GetName()
		default:
			t.Fatalf("unexpected resource %T", m)
		}
		key := res.GetTypeUrl() + " " + name
		if seen[key] {
			t.Errorf("merged, two resources are named %s", key)
		}
		seen[key] = true
	}
	if routeConfigs != 2 || clusters != 2 {
		t.Errorf("got %d route configurations and %d clusters, want 2 of each", routeConfigs, clusters)
	}

	// One virtual host for both files' routes.
	if err := proto.Clone(one).(*routev3.RouteConfiguration).ValidateAll(); err != nil {
		t.Errorf("the routes in one virtual host: refused by Envoy's validation: %v", err)
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for _, r := range one.VirtualHosts[0].GetRoutes() {
		if names[r.GetName()] || paths[r.GetMatch().GetPath()] {
			t.Errorf("in one virtual host, route %s (path %s) twice", r.GetName(), r.GetMatch().GetPath())
		}
		names[r.GetName()], paths[r.GetMatch().GetPath()] = true, true
	}
	if len(names) != 2 {
		t.Errorf("one virtual host has routes %v, want the two methods'", names)
	}
}
