// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// newerOptions reports, as RESILIENT_INVALID_VALUE, each (resilient.v1.*)
// value of fd that this lint plugin cannot check because the options proto
// fd imports is newer than it: a field of the Policy message, or a
// resilient.v1 extension, that the lint plugin's contract lacks. The code
// generator refuses the same values (its skew check); without this, lint
// would pass what generation refuses, the value unchecked.
func newerOptions(fd protoreflect.FileDescriptor, add func(d protoreflect.Descriptor, option, path, msg string)) {
	one := func(d protoreflect.Descriptor, opts proto.Message, empty proto.Message, xt protoreflect.ExtensionType, option string) {
		if opts == nil {
			return
		}
		b, err := proto.Marshal(opts)
		if err != nil {
			return
		}
		if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(b, empty); err != nil {
			return
		}
		if proto.HasExtension(empty, xt) {
			p, _ := proto.GetExtension(empty, xt).(*resilientv1.Policy)
			rules.NewerFields(fd, p, func(path string, num protowire.Number, parent protoreflect.FullName) {
				add(d, option, "."+path, newerLintMessage(fmt.Sprintf("%s has no field %s (number %d)", parent, path[strings.LastIndex(path, ".")+1:], num)))
			})
		}
		for _, x := range rules.NewerExtensions(fd, empty) {
			add(d, option, "", newerLintMessage(fmt.Sprintf("it does not know the option (%s)", x.FullName())))
		}
	}
	one(fd, fd.Options(), &descriptorpb.FileOptions{}, resilientv1.E_File, "(resilient.v1.file)")
	for i := range fd.Services().Len() {
		s := fd.Services().Get(i)
		one(s, s.Options(), &descriptorpb.ServiceOptions{}, resilientv1.E_Service, "(resilient.v1.service)")
		for j := range s.Methods().Len() {
			m := s.Methods().Get(j)
			one(m, m.Options(), &descriptorpb.MethodOptions{}, resilientv1.E_Method, "(resilient.v1.method)")
		}
	}
}

// newerLintMessage says what an option of a newer contract means to lint
// and how to mend it.
func newerLintMessage(what string) string {
	return "the options proto (resilient/v1/resilient.proto) is newer than this lint plugin, and " + what +
		", so it cannot be checked (and a protoc-gen-go-resilient of this version refuses it): install the lint plugin of the version the options proto came from " +
		"(go install github.com/go-resilient/resilient/cmd/buf-plugin-resilient@VERSION), " +
		"or write the options proto of your protoc-gen-go-resilient with protoc-gen-go-resilient -options-proto=DIR and do not use the field"
}
