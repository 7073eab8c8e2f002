// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"iter"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// Field numbers of descriptor.proto on the path of a policy's source
// location.
const (
	fileOptionsField    = 8 // FileDescriptorProto.options
	serviceField        = 6 // FileDescriptorProto.service
	serviceOptionsField = 3 // ServiceDescriptorProto.options
	methodField         = 2 // ServiceDescriptorProto.method
	methodOptionsField  = 4 // MethodDescriptorProto.options
)

// RawSite is an element of a file that can hold a policy, as read from a
// request whose options' extensions were left as bytes (unmarshalled with
// an empty resolver): a value that does not parse as this program's
// Policy is still there, in Options' unknown fields, to be named.
type RawSite struct {
	// Options are the element's options; nil or invalid when it has none.
	Options proto.Message
	// Extension is the policy's extension at this level.
	Extension protoreflect.ExtensionType
	Level     Level
	// Name is the element's full name: the package for the file.
	Name protoreflect.FullName
	// Path is the source path of Options in the file.
	Path protoreflect.SourcePath
}

// RawSites yields the places of fd that can hold a policy: the file, then
// each service followed by its methods.
func RawSites(fd *descriptorpb.FileDescriptorProto) iter.Seq[RawSite] {
	return func(yield func(RawSite) bool) {
		pkg := protoreflect.FullName(fd.GetPackage())
		if !yield(RawSite{fd.GetOptions(), resilientv1.E_File, LevelFile, pkg, OptionsPath(LevelFile, 0, 0)}) {
			return
		}
		for i, sd := range fd.GetService() {
			sname := pkg.Append(protoreflect.Name(sd.GetName()))
			if !yield(RawSite{sd.GetOptions(), resilientv1.E_Service, LevelService, sname, OptionsPath(LevelService, i, 0)}) {
				return
			}
			for j, m := range sd.GetMethod() {
				mname := sname.Append(protoreflect.Name(m.GetName()))
				if !yield(RawSite{m.GetOptions(), resilientv1.E_Method, LevelMethod, mname, OptionsPath(LevelMethod, i, j)}) {
					return
				}
			}
		}
	}
}

// OptionsPath is the source path of the options message of the file, of
// its service'th service or of that service's method'th method, as l
// says; a policy's own path appends its extension's number.
func OptionsPath(l Level, service, method int) protoreflect.SourcePath {
	switch l {
	case LevelFile:
		return protoreflect.SourcePath{fileOptionsField}
	case LevelService:
		return protoreflect.SourcePath{serviceField, int32(service), serviceOptionsField}
	default:
		return protoreflect.SourcePath{serviceField, int32(service), methodField, int32(method), methodOptionsField}
	}
}

// FilterRaw calls keep with the bytes of each length-delimited value of
// the field numbered num among the unknown fields of opts, in order, and
// returns those fields without the values keep refused. ok is false, and
// nothing more is called, when opts is nil or invalid or its unknown
// fields do not parse.
func FilterRaw(opts proto.Message, num protowire.Number, keep func(v []byte) bool) (kept protoreflect.RawFields, ok bool) {
	if opts == nil || !opts.ProtoReflect().IsValid() {
		return nil, false
	}
	rest := []byte(opts.ProtoReflect().GetUnknown())
	for len(rest) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(rest)
		if tagLen < 0 {
			return nil, false
		}
		valLen := protowire.ConsumeFieldValue(n, typ, rest[tagLen:])
		if valLen < 0 {
			return nil, false
		}
		field := rest[:tagLen+valLen]
		rest = rest[tagLen+valLen:]
		if n == num && typ == protowire.BytesType {
			if v, _ := protowire.ConsumeBytes(field[tagLen:]); !keep(v) {
				continue
			}
		}
		kept = append(kept, field...)
	}
	return kept, true
}
