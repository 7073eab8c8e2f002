// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// Field numbers of descriptor.proto on the path of an option's source
// location.
const (
	fileOptionsField    = 8 // FileDescriptorProto.options
	serviceField        = 6 // FileDescriptorProto.service
	serviceOptionsField = 3 // ServiceDescriptorProto.options
	methodField         = 2 // ServiceDescriptorProto.method
	methodOptionsField  = 4 // MethodDescriptorProto.options
)

// optionsNumber is the field number of the three extensions.
var optionsNumber = int32(resilientv1.E_Method.TypeDescriptor().Number())

// checkOptionsVersion refuses the (resilient.v1.*) options of f that this
// plugin cannot read because the options proto f imports is newer than the
// plugin: a field of the Policy message, or a resilient.v1 extension, that
// the plugin's copy of the contract does not have but f sets. Unmarshalling
// keeps such a value as an unknown field, and resolving would silently
// ignore it. An older options proto lacks fields the plugin knows, which
// is no problem: they are unset.
func checkOptionsVersion(f *protogen.File, ps *problems) {
	fd := f.Desc
	check := func(opts proto.Message, xt protoreflect.ExtensionType, lvl level, at site) {
		if opts == nil {
			return
		}
		loc := at.options[lvl] // the source path of the option (problem.go)
		if p := policyOf(opts, xt); p != nil {
			rules.NewerFields(fd, p, func(path string, num protowire.Number, parent protoreflect.FullName) {
				name := path[strings.LastIndex(path, ".")+1:]
				ps.add(siteAt(f, at, loc), lvl, path, "%s", newerMessage(fmt.Sprintf("%s has no field %s (number %d)", parent, name, num)))
			})
		}
		for _, x := range rules.NewerExtensions(fd, opts) {
			// At the option statement that sets the extension, else at the
			// options of the element.
			own := append(loc[:len(loc)-1:len(loc)-1], int32(x.Number()))
			if fd.SourceLocations().ByPath(own).Path == nil {
				own = loc[:len(loc)-1]
			}
			ps.add(siteAt(f, at, own), lvl, "", "%s", newerMessage(fmt.Sprintf("it does not know the option (%s)", x.FullName())))
		}
	}
	check(fd.Options(), resilientv1.E_File, levelFile, fileSite(f))
	for _, s := range f.Services {
		check(s.Desc.Options(), resilientv1.E_Service, levelService, serviceSite(f, s))
		for _, m := range s.Methods {
			check(m.Desc.Options(), resilientv1.E_Method, levelMethod, methodSite(f, m))
		}
	}
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
