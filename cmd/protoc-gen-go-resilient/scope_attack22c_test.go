// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// TestAttack22cFileOptionWithoutServices: a file's options are the
// defaults of the services it declares (README, Options). Written in a
// file that declares none (a "defaults.proto" of the package, or a file of
// messages that the service files import), they apply to nothing; they
// were accepted without a word, a ratio of 2 included. The plugin and
// lint refuse them (rules.CheckFileScope, RESILIENT_SCOPE), at the file's
// option, naming why and how to mend it, and without checking the values
// (the whole option is to go); the plugin writes nothing.
func TestAttack22cFileOptionWithoutServices(t *testing.T) {
	req := testdataRequest(t, "attack22c", "nosvc/defaults.proto")
	const msg = "nosvc/defaults.proto declares no service, and a file's options are the defaults of its own services only (not of its package, nor of the files that import it), so these would apply to nothing: write them in each file that declares the services, or remove them"
	resp := runPlugin(t, req)
	if want := "nosvc/defaults.proto:10:1: resilienttest.r22c.nosvc: (resilient.v1.file): " + msg; resp.GetError() != want {
		t.Errorf("plugin: got\n%s\nwant\n%s", resp.GetError(), want)
	}
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files", len(resp.File))
	}
	var got []rules.Finding
	lintFindings(t, req, func(d protoreflect.Descriptor, fi rules.Finding) { got = append(got, fi) })
	if len(got) != 1 || got[0].Rule != rules.RuleScope || got[0].Level != rules.LevelFile || got[0].Message != msg {
		t.Errorf("lint: got %+v, want one %s finding at the file: %s", got, rules.RuleScope, msg)
	}

}
