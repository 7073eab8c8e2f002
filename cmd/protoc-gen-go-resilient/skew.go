// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// optionsNumber is the field number of the three extensions.
var optionsNumber = int32(resilientv1.E_Method.TypeDescriptor().Number())

// checkOptionsVersion refuses the (resilient.v1.*) options of f that this
// plugin cannot read because the options proto f imports is newer than
// the plugin (rules.NewerOptions): a field of the policy at the option's
// value, an extension at the option statement that sets it.
func checkOptionsVersion(f *protogen.File, ps *problems) {
	siteOf := sitesOf(f)
	rules.NewerOptions(f.Desc, func(d protoreflect.Descriptor, n rules.NewerOption) {
		at, lvl := siteOf(d), n.Level
		if n.Extension != nil {
			// At the option statement that sets the extension, else at the
			// options of the element.
			loc := at.options[lvl]
			own := append(loc[:len(loc)-1:len(loc)-1], int32(n.Extension.Number()))
			if f.Desc.SourceLocations().ByPath(own).Path == nil {
				own = loc[:len(loc)-1]
			}
			at = siteAt(f, at, own)
		}
		if n.Retyped {
			ps.add(at, lvl, n.Path, "%s", retypedMessage(n))
			return
		}
		ps.add(at, lvl, n.Path, "%s", newerMessage(n.What))
	})
}

// retypedMessage says what a field whose type differs between the options
// proto and the plugin's contract means (n.Retyped), and how to mend it.
// The copy is not merely newer: the plugin cannot read the value at all.
func retypedMessage(n rules.NewerOption) string {
	return fmt.Sprintf("the options proto (resilient/v1/resilient.proto) differs from the one of this plugin, protoc-gen-go-resilient v%s: %s, where this plugin expects %s, so the value cannot be read: "+
		"write the options proto of v%s with protoc-gen-go-resilient -options-proto=DIR and %s as %s, "+
		"or use the plugin of the version the options proto came from (go get -tool github.com/go-resilient/resilient/cmd/protoc-gen-go-resilient@VERSION)", version, n.What, n.Expected(), version, n.Name, n.Expects)
}

// newerMessage says what an unknown option means and how to mend it.
func newerMessage(what string) string {
	return fmt.Sprintf("the options proto (resilient/v1/resilient.proto) is newer than this plugin, protoc-gen-go-resilient v%s, and %s, so it would be ignored: "+
		"upgrade the plugin to the version the options proto came from (go get -tool github.com/go-resilient/resilient/cmd/protoc-gen-go-resilient@VERSION), "+
		"or write the options proto of v%s with protoc-gen-go-resilient -options-proto=DIR and do not use the field", version, what, version)
}

// siteAt is at, placed at the option's own source location when the file
// has one (the option statement), else at the element it is written on.
func siteAt(f *protogen.File, at site, loc protoreflect.SourcePath) site {
	if l := f.Desc.SourceLocations().ByPath(loc); l.Path != nil {
		at.pos = position(f, l)
	}
	return at
}
