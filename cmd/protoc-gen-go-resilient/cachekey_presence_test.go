// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheKeyPresenceEachAPI generates the key function of cache key
// fields with presence (proto3 optional fields and a oneof member of a
// request in another Go package, named like the function's locals and Go
// keywords) under each Go API protoc-gen-go can give the message, and
// builds and vets it beside protoc-gen-go's and protoc-gen-go-grpc's
// output: the open API is read through the fields and the oneof's
// wrapper type (qualified with its package), the hybrid and opaque APIs
// through the Has methods.
func TestCacheKeyPresenceEachAPI(t *testing.T) {
	goBin, repo := goAndRepo(t, "compiling generated code")
	for _, c := range []struct {
		level string   // the default_api_level parameter; "" for the open API
		want  []string // in the generated file
	}{
		{"", []string{
			"var inPart, rangePart, okPart string",
			"if in.In != nil {\n\t\t\t\t\tinPart = \"=\" + in.GetIn()",
			"if in.Range != nil {\n\t\t\t\t\trangePart = \"=\" + runtime.KeyFromInt(in.GetRange())",
			"if _, ok := in.Runtime.(*keyreq.Request_Ok); ok {\n\t\t\t\t\tokPart = \"=\" + runtime.KeyFromBytes(in.GetOk())",
			"if _, ok := in.Runtime.(*keyreq.Request_Ok); ok {\n\t\t\t\t\treturn \"=\" + runtime.KeyFromBytes(in.GetOk())\n\t\t\t\t}\n\t\t\t\treturn \"\"",
		}},
		{"API_HYBRID", []string{
			"if in.HasIn() {", "if in.HasRange() {", "if in.HasOk() {\n\t\t\t\t\tokPart =",
			"if in.HasOk() {\n\t\t\t\t\treturn \"=\" + runtime.KeyFromBytes(in.GetOk())",
		}},
		{"API_OPAQUE", []string{
			"if in.HasIn() {", "if in.HasRange() {", "if in.HasOk() {\n\t\t\t\t\tokPart =",
		}},
	} {
		name := c.level
		if name == "" {
			name = "API_OPEN"
		}
		t.Run(name, func(t *testing.T) {
			param := "module=" + testModule
			if c.level != "" {
				param += ",default_api_level=" + c.level
			}
			req := compileRequest(t, param, []string{"testdata", "../../options"}, "keyset/svc/svc.proto", "keyset/req/req.proto")
			dir := t.TempDir()
			writeGoAndGRPC(t, goBin, repo, dir, req)
			resp := runPlugin(t, req)
			if resp.Error != nil {
				t.Fatalf("plugin error:\n%s", resp.GetError())
			}
			if len(resp.File) != 1 {
				t.Fatalf("the plugin wrote %d files, want 1", len(resp.File))
			}
			f := resp.File[0]
			for _, w := range c.want {
				if !strings.Contains(f.GetContent(), w) {
					t.Errorf("%s has no %q", f.GetName(), w)
				}
			}
			if strings.Contains(f.GetContent(), "protoreflect") || strings.Contains(f.GetContent(), "ProtoReflect") {
				t.Errorf("%s reads the request by reflection", f.GetName())
			}
			writeFile(t, filepath.Join(dir, filepath.FromSlash(f.GetName())), []byte(f.GetContent()))
			buildAndVet(t, goBin, dir, repo, testModule, " (generated under "+name+")")
		})
	}
}
