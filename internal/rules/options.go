// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// PolicyOf returns the policy written on d, the file, a service or a
// method (its (resilient.v1.file), (resilient.v1.service) or
// (resilient.v1.method) option), or nil when it sets none.
func PolicyOf(d protoreflect.Descriptor) *Policy {
	_, p := optionsOf(d)
	return p
}

// optionsOf returns the options of d (the file, a service or a method),
// and the policy of its resilient.v1 extension (nil when it sets none);
// opts is nil when d has none, is no such element, or they do not parse.
// Options that reach a buf plugin may hold the extension as unknown
// fields, so they are parsed again, into a fresh options message, with
// the extensions linked into this program: what is still unknown then
// (a field or extension of a newer contract, newer.go) this program
// cannot read.
func optionsOf(d protoreflect.Descriptor) (opts proto.Message, p *Policy) {
	var xt protoreflect.ExtensionType
	switch d.(type) {
	case protoreflect.FileDescriptor:
		opts, xt = &descriptorpb.FileOptions{}, resilientv1.E_File
	case protoreflect.ServiceDescriptor:
		opts, xt = &descriptorpb.ServiceOptions{}, resilientv1.E_Service
	case protoreflect.MethodDescriptor:
		opts, xt = &descriptorpb.MethodOptions{}, resilientv1.E_Method
	default:
		return nil, nil
	}
	raw := d.Options()
	if raw == nil {
		return nil, nil
	}
	b, err := proto.Marshal(raw)
	if err != nil {
		return nil, nil
	}
	if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(b, opts); err != nil {
		return nil, nil
	}
	if proto.HasExtension(opts, xt) {
		p, _ = proto.GetExtension(opts, xt).(*Policy)
	}
	return opts, p
}
