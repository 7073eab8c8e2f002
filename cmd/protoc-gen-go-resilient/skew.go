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
			unknownFields(p.ProtoReflect(), nil, func(path []string, num protowire.Number, parent protoreflect.FullName) {
				name := fieldName(fd, parent, num)
				ps.add(siteAt(f, at, loc), lvl, strings.Join(append(path, name), "."), "%s", newerMessage(fmt.Sprintf("%s has no field %s (number %d)", parent, name, num)))
			})
		}
		for _, x := range newerExtensions(fd, opts) {
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

// unknownFields calls found for every unknown field of m and of the
// messages set in it, with the path of field names that leads to it and
// the full name of the message that holds it.
func unknownFields(m protoreflect.Message, path []string, found func(path []string, num protowire.Number, parent protoreflect.FullName)) {
	for b := m.GetUnknown(); len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			break
		}
		found(path, num, m.Descriptor().FullName())
		b = b[n:]
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		p := append(append([]string(nil), path...), string(fd.Name()))
		if fd.IsList() {
			for i := range v.List().Len() {
				unknownFields(v.List().Get(i).Message(), p, found)
			}
			return true
		}
		unknownFields(v.Message(), p, found)
		return true
	})
}

// fieldName names field num of the message named parent as the options
// proto f imports defines it ("jitter"), or "#num" when that copy does not
// define it either.
func fieldName(f protoreflect.FileDescriptor, parent protoreflect.FullName, num protowire.Number) string {
	if md := findMessage(f, parent, map[string]bool{}); md != nil {
		if fd := md.Fields().ByNumber(num); fd != nil {
			return string(fd.Name())
		}
	}
	return fmt.Sprintf("#%d", num)
}

// findMessage finds the message named name among the files f imports,
// directly or not.
func findMessage(f protoreflect.FileDescriptor, name protoreflect.FullName, seen map[string]bool) protoreflect.MessageDescriptor {
	if seen[f.Path()] {
		return nil
	}
	seen[f.Path()] = true
	if f.Package() == name.Parent() || strings.HasPrefix(string(name), string(f.Package())+".") {
		if md := findIn(f.Messages(), name); md != nil {
			return md
		}
	}
	for i := range f.Imports().Len() {
		if md := findMessage(f.Imports().Get(i).FileDescriptor, name, seen); md != nil {
			return md
		}
	}
	return nil
}

func findIn(ms protoreflect.MessageDescriptors, name protoreflect.FullName) protoreflect.MessageDescriptor {
	for i := range ms.Len() {
		md := ms.Get(i)
		if md.FullName() == name {
			return md
		}
		if n := findIn(md.Messages(), name); n != nil {
			return n
		}
	}
	return nil
}

// newerExtensions names the resilient.v1 extensions that the imported
// options proto defines on the options message of opts, that this plugin
// does not know, and that opts sets (as an unknown field: the plugin could
// not parse them).
func newerExtensions(f protoreflect.FileDescriptor, opts proto.Message) []protoreflect.ExtensionDescriptor {
	unknown := map[protowire.Number]bool{}
	for b := opts.ProtoReflect().GetUnknown(); len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			break
		}
		unknown[num] = true
		b = b[n:]
	}
	if len(unknown) == 0 {
		return nil
	}
	known := resilientv1.File_resilient_v1_resilient_proto.Extensions()
	target := opts.ProtoReflect().Descriptor().FullName()
	var out []protoreflect.ExtensionDescriptor
	seen := map[string]bool{}
	var walk func(f protoreflect.FileDescriptor)
	walk = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		if f.Package() == resilientv1.File_resilient_v1_resilient_proto.Package() {
			for i := range f.Extensions().Len() {
				x := f.Extensions().Get(i)
				if x.ContainingMessage().FullName() == target && unknown[x.Number()] && known.ByName(x.Name()) == nil {
					out = append(out, x)
				}
			}
		}
		for i := range f.Imports().Len() {
			walk(f.Imports().Get(i).FileDescriptor)
		}
	}
	walk(f)
	return out
}
