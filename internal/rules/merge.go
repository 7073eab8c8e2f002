// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// Level is where in a .proto file a policy is written: the file, a service
// or a method, ordered from the most general to the most specific.
type Level int

// The levels of a policy.
const (
	LevelFile Level = iota
	LevelService
	LevelMethod
)

// Option names the extension of a level as the user writes it:
// "(resilient.v1.method)".
func (l Level) Option() string {
	switch l {
	case LevelFile:
		return "(resilient.v1.file)"
	case LevelService:
		return "(resilient.v1.service)"
	default:
		return "(resilient.v1.method)"
	}
}

// OptionPath names the field at path inside the level's option as the
// user writes it, "(resilient.v1.method).retry.max_attempts"; the option
// itself for path "". The plugin's refusals and lint's findings name the
// value at fault with it.
func (l Level) OptionPath(path string) string {
	if path == "" {
		return l.Option()
	}
	return l.Option() + "." + path
}

// Layer is the policy written at one level; Policy is nil when the level
// sets none.
type Layer struct {
	Level  Level
	Policy *resilientv1.Policy
}

// Merged is a policy resolved from several layers. SetBy records, for every
// field path that some layer set ("retry", "retry.max_attempts",
// "timeout"), the most specific level that set it, so that a problem can
// name the option where the value was written and a reader where it came
// from.
type Merged struct {
	Policy *resilientv1.Policy
	SetBy  map[string]Level
}

// Has reports whether some layer set the field at path.
func (m Merged) Has(path string) bool {
	_, ok := m.SetBy[path]
	return ok
}

// Origin says where the value at path comes from when that is not the
// option being blamed: " (the default)", " (set in (resilient.v1.file))",
// or "" when it is the blamed option's own.
func (m Merged) Origin(path string, blamed Level) string {
	lvl, ok := m.SetBy[path]
	switch {
	case !ok:
		return " (the default)"
	case lvl != blamed:
		return " (set in " + lvl.Option() + ")"
	default:
		return ""
	}
}

// ServicePolicy returns the options written on service s (nil for none)
// and the policy its methods share: the file's and the service's options
// merged (Merge), with the level that set each value. The plugin resolves
// the service's shared settings from it, and CheckFile checks them.
func ServicePolicy(s protoreflect.ServiceDescriptor) (own *Policy, shared Merged) {
	own = PolicyOf(s)
	return own, Merge(Layer{LevelFile, PolicyOf(s.ParentFile())}, Layer{LevelService, own})
}

// MethodPolicy returns the options written on method m (nil for none) and
// the policy in force on it: the file's, its service's and its own options
// merged (Merge), with the level that set each value. The plugin resolves
// the method from it, and CheckFile checks it.
func MethodPolicy(m protoreflect.MethodDescriptor) (own *Policy, eff Merged) {
	s := m.Parent().(protoreflect.ServiceDescriptor)
	own = PolicyOf(m)
	return own, Merge(Layer{LevelFile, PolicyOf(s.ParentFile())}, Layer{LevelService, PolicyOf(s)}, Layer{LevelMethod, own})
}

// Merge merges the layers in order, each overriding the ones before it
// field by field: a scalar or a repeated field set in a later layer replaces
// the earlier value whole; a sub-message is merged recursively, except the
// well-known types (google.protobuf.Duration), which are single values.
func Merge(layers ...Layer) Merged {
	m := Merged{Policy: &resilientv1.Policy{}, SetBy: map[string]Level{}}
	for _, l := range layers {
		if l.Policy != nil {
			mergeMessage(m.Policy.ProtoReflect(), l.Policy.ProtoReflect(), l.Level, "", m.SetBy)
		}
	}
	return m
}

func mergeMessage(dst, src protoreflect.Message, lvl Level, prefix string, setBy map[string]Level) {
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
