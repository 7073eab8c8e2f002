// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// level is where in a .proto file a policy is written: the file, a service
// or a method. Levels are ordered from the most general to the most
// specific.
type level int

const (
	levelFile level = iota
	levelService
	levelMethod
)

// option names the extension of a level as the user writes it.
func (l level) option() string {
	switch l {
	case levelFile:
		return "(resilient.v1.file)"
	case levelService:
		return "(resilient.v1.service)"
	default:
		return "(resilient.v1.method)"
	}
}

// layer is the policy written at one level; policy is nil when the level
// sets none.
type layer struct {
	level  level
	policy *resilientv1.Policy
}

// merged is a policy resolved from several layers. setBy records, for every
// field path that some layer set ("retry", "retry.max_attempts",
// "timeout"), the most specific level that set it, so that a problem can
// name the option where the value was written.
type merged struct {
	policy *resilientv1.Policy
	setBy  map[string]level
}

// has reports whether some layer set the field at path.
func (m merged) has(path string) bool {
	_, ok := m.setBy[path]
	return ok
}

// mergeLayers merges the layers in order, each overriding the ones before it
// field by field: a scalar or a repeated field set in a later layer replaces
// the earlier value whole; a sub-message is merged recursively, except the
// well-known types (google.protobuf.Duration), which are single values.
func mergeLayers(layers ...layer) merged {
	m := merged{policy: &resilientv1.Policy{}, setBy: map[string]level{}}
	for _, l := range layers {
		if l.policy != nil {
			mergeMessage(m.policy.ProtoReflect(), l.policy.ProtoReflect(), l.level, "", m.setBy)
		}
	}
	return m
}

func mergeMessage(dst, src protoreflect.Message, lvl level, prefix string, setBy map[string]level) {
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		setBy[path] = lvl
		switch {
		case fd.IsList():
			list := dst.NewField(fd).List()
			for i, src := 0, v.List(); i < src.Len(); i++ {
				list.Append(cloneValue(fd, src.Get(i)))
			}
			dst.Set(fd, protoreflect.ValueOfList(list))
		case fd.IsMap():
			mp := dst.NewField(fd).Map()
			v.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				mp.Set(k, cloneValue(fd.MapValue(), v))
				return true
			})
			dst.Set(fd, protoreflect.ValueOfMap(mp))
		case fd.Message() != nil && !isSingleValue(fd.Message()):
			mergeMessage(dst.Mutable(fd).Message(), v.Message(), lvl, path+".", setBy)
		default:
			dst.Set(fd, cloneValue(fd, v))
		}
		return true
	})
}

// isSingleValue reports whether a message type is one value rather than a
// group of settings: a Duration of {seconds: 1} written below a Duration of
// {nanos: 5} replaces it, it does not make 1.000000005 s.
func isSingleValue(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

func cloneValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	if fd.Message() == nil {
		return v
	}
	return protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect())
}
