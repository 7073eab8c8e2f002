// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// noServiceMsg is the refusal of a file option in file, which declares no
// service (rules.CheckFileScope).
func noServiceMsg(file string) string {
	return file + " declares no service, and a file's options are the defaults of its own services only (not of its package, nor of the files that import it), so these would apply to nothing: write them in each file that declares the services, or remove them"
}

// TestFileOptionNeedsService: a (resilient.v1.file) option in a file
// without services is refused however it is written (one message, field
// by field, empty), once, at its first statement, and the plugin writes
// nothing; lint finds the same, once, at the file.
func TestFileOptionNeedsService(t *testing.T) {
	for _, tc := range []struct {
		file, pkg, pos string
	}{
		{"fieldwise.proto", "filescope.fieldwise", "fieldwise.proto:10:1"},
		{"empty.proto", "filescope.empty", "empty.proto:9:1"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			req := testdataRequest(t, "filescope", tc.file)
			resp := runPlugin(t, req)
			if want := tc.pos + ": " + tc.pkg + ": (resilient.v1.file): " + noServiceMsg(tc.file); resp.GetError() != want {
				t.Errorf("plugin: got\n%s\nwant\n%s", resp.GetError(), want)
			}
			if len(resp.File) != 0 {
				t.Errorf("wrote %d files", len(resp.File))
			}
			var got []rules.Finding
			lintFindings(t, req, func(_ protoreflect.Descriptor, fi rules.Finding) { got = append(got, fi) })
			if len(got) != 1 || got[0] != (rules.Finding{Rule: rules.RuleScope, Level: rules.LevelFile, Message: noServiceMsg(tc.file)}) {
				t.Errorf("lint: got %+v, want one %s finding at the file", got, rules.RuleScope)
			}
		})
	}
}

// TestFileOptionNeedsServiceBesideServices: generated with the file of
// its package that declares the service and imports it, the service-less
// file's option is still refused, and nothing is written for either file
// (no *.pb.go of the service without the policy its author meant).
func TestFileOptionNeedsServiceBesideServices(t *testing.T) {
	resp := runPlugin(t, testdataRequest(t, "filescope", "defaults.proto", "svc.proto"))
	if want := "defaults.proto:10:1: filescope.svc: (resilient.v1.file): " + noServiceMsg("defaults.proto"); resp.GetError() != want {
		t.Errorf("plugin: got\n%s\nwant\n%s", resp.GetError(), want)
	}
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files", len(resp.File))
	}
}

// TestImportedFileOptionAppliesToNothing: generated alone, the file with
// the service gets none of the option of the file it imports (the
// importer's own file option is what applies): Get has no timeout, and
// its generated policy says so.
func TestImportedFileOptionAppliesToNothing(t *testing.T) {
	req := testdataRequest(t, "filescope", "svc.proto")
	resp := runPlugin(t, req)
	if resp.Error != nil {
		t.Fatalf("plugin error:\n%s", resp.GetError())
	}
	if len(resp.File) != 1 {
		t.Fatalf("wrote %d files, want svc_resilient.pb.go", len(resp.File))
	}
	if got := resp.File[0].GetContent(); strings.Contains(got, "300*time.Millisecond") || strings.Contains(got, "300 * time.Millisecond") {
		t.Errorf("svc_resilient.pb.go has the imported file's timeout:\n%s", got)
	}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gen.Files {
		if f.Desc.Path() != "svc.proto" {
			continue
		}
		_, eff := rules.MethodPolicy(f.Services[0].Methods[0].Desc)
		if d := eff.Policy.GetTimeout(); d != nil {
			t.Errorf("Get's timeout: got %v from the imported file, want none", d.AsDuration())
		}
	}
}

// TestNoServiceNoOption: a file without services or resilient options is
// no concern of the plugin: no error, nothing written, no finding.
func TestNoServiceNoOption(t *testing.T) {
	req := testdataRequest(t, "filescope", "plain.proto")
	resp := runPlugin(t, req)
	if resp.Error != nil || len(resp.File) != 0 {
		t.Errorf("plugin: error %q and %d files, want neither", resp.GetError(), len(resp.File))
	}
	lintFindings(t, req, func(d protoreflect.Descriptor, fi rules.Finding) {
		t.Errorf("lint: %s: %+v", d.FullName(), fi)
	})
}
