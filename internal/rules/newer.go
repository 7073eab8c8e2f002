// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// NewerOption is a value written in a .proto file that this program
// cannot read because the options proto the file imports is newer than
// this program's options contract: a field of the policy (or of a message
// in it), or a resilient.v1 extension, that the contract lacks.
// Unmarshalling keeps such a value as an unknown field, and resolving or
// checking would silently ignore it; the plugin refuses it and lint
// reports it, each in its own words. An older options proto lacks fields
// this program knows, which is no problem: they are unset.
type NewerOption struct {
	// Level is the level whose options hold the value.
	Level Level
	// Path is the field path of a field inside the level's option
	// ("retry.jitter"); "" for an extension. A field the imported copy
	// does not define either is named "#number".
	Path string
	// Extension is the extension, defined by the imported copy on the
	// level's options message; nil for a field.
	Extension protoreflect.ExtensionDescriptor
	// What says what this program lacks: "resilient.v1.Retry has no field
	// jitter (number 99)", "it does not know the option
	// (resilient.v1.audit)"; for a Retyped field, the field's type in the
	// imported copy: "resilient.v1.Retry.max_attempts (number 1) is a
	// string in it".
	What string
	// Retyped is set when this program's contract has the field, with
	// another type than the imported copy gives it (max_attempts as a
	// string): the value was written as the copy's type and cannot be
	// read as this program's. The copy is then not merely newer: it
	// differs, What says what the file has and Expects what this
	// program's contract has.
	Retyped bool
	// Expects is, for a Retyped field, its type in this program's
	// contract ("a uint32"), and Name its name there (the copy may have
	// renamed it too).
	Expects, Name string
}

// Expected is, for a Retyped field, what this program's contract has: its
// type, and its name when the imported copy names it otherwise ("a double
// named failure_ratio").
func (n NewerOption) Expected() string {
	if n.Name != n.Path[strings.LastIndex(n.Path, ".")+1:] {
		return n.Expects + " named " + n.Name
	}
	return n.Expects
}

// NewerOptions calls found for every value of f that this program's
// options contract lacks (NewerOption), with the file, service or method
// it is written on: for each of them in the order of the file, first the
// fields set in its policy, then its extensions.
func NewerOptions(f protoreflect.FileDescriptor, found func(at protoreflect.Descriptor, n NewerOption)) {
	one := func(d protoreflect.Descriptor, lvl Level) {
		opts, p := optionsOf(d)
		if opts == nil {
			return
		}
		newerFields(f, p, func(path string, num protowire.Number, parent protoreflect.FullName) {
			name := path[strings.LastIndex(path, ".")+1:]
			if ours := contractField(parent, num); ours != nil {
				found(d, NewerOption{Level: lvl, Path: path, Retyped: true, What: retyped(f, parent, num, name),
					Expects: article(typeName(ours)), Name: string(ours.Name())})
				return
			}
			found(d, NewerOption{Level: lvl, Path: path,
				What: fmt.Sprintf("%s has no field %s (number %d)", parent, name, num)})
		})
		if p != nil {
			retypedSet(f, p.ProtoReflect(), nil, func(path string, ours, theirs protoreflect.FieldDescriptor) {
				parent := ours.ContainingMessage().FullName()
				found(d, NewerOption{Level: lvl, Path: path, Retyped: true, What: retyped(f, parent, ours.Number(), string(theirs.Name())),
					Expects: article(typeName(ours)), Name: string(ours.Name())})
			})
		}
		for _, x := range newerExtensions(f, opts) {
			found(d, NewerOption{Level: lvl, Extension: x, What: fmt.Sprintf("it does not know the option (%s)", x.FullName())})
		}
	}
	one(f, LevelFile)
	for i := range f.Services().Len() {
		s := f.Services().Get(i)
		one(s, LevelService)
		for j := range s.Methods().Len() {
			one(s.Methods().Get(j), LevelMethod)
		}
	}
}

// newerFields calls found for every field set in p that this program's
// options contract does not have (an unknown field), with its path of
// field names inside the option ("retry.jitter"), its number and the full
// name of the message that holds it. A field the options proto f imports
// does not define either is named "#number".
func newerFields(f protoreflect.FileDescriptor, p *Policy, found func(path string, num protowire.Number, parent protoreflect.FullName)) {
	if p == nil {
		return
	}
	unknownFields(p.ProtoReflect(), nil, func(path []string, num protowire.Number, parent protoreflect.FullName) {
		found(strings.Join(append(path, fieldName(f, parent, num)), "."), num, parent)
	})
}

// retypedSet calls found for every field set in m (a message of this
// program's contract) that the options proto f imports gives another type
// of the same wire type, with its path of field names in the copy: the
// value parsed, but as another value than the one written. A copy's
// sint32 max_attempts: 3 is read as this program's uint32 6 (zigzag), a
// copy's timeout of a message {int64 ms = 1} as a Duration of that many
// seconds, a copy's repeated enum of codes as strings of raw bytes.
// Another wire type leaves the value unknown (newerFields) or unreadable
// (Unreadable) instead. A field of m the copy does not define, or a
// message the copy lacks, is not judged here.
func retypedSet(f protoreflect.FileDescriptor, m protoreflect.Message, path []string, found func(path string, ours, theirs protoreflect.FieldDescriptor)) {
	md := findMessage(f, m.Descriptor().FullName(), map[string]bool{})
	if md == nil {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		theirs := md.Fields().ByNumber(fd.Number())
		if theirs == nil {
			return true
		}
		p := append(append([]string(nil), path...), string(theirs.Name()))
		switch {
		case typeName(theirs) != typeName(fd) || theirs.IsMap() != fd.IsMap():
			found(strings.Join(p, "."), fd, theirs)
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			for i := range v.List().Len() {
				retypedSet(f, v.List().Get(i).Message(), p, found)
			}
		default:
			retypedSet(f, v.Message(), p, found)
		}
		return true
	})
}

// contractField is field num of the message named parent in this
// program's options contract, or nil when the contract has none. A field
// the contract has that is still unknown was written with another wire
// type than the contract's: the copy the file imports gives it another
// type.
func contractField(parent protoreflect.FullName, num protowire.Number) protoreflect.FieldDescriptor {
	md := findIn(resilientv1.File_resilient_v1_resilient_proto.Messages(), parent)
	if md == nil {
		return nil
	}
	return md.Fields().ByNumber(num)
}

// retyped says what field num of the message named parent (named name)
// is in the options proto f imports: "resilient.v1.Retry.max_attempts
// (number 1) is a string in it".
func retyped(f protoreflect.FileDescriptor, parent protoreflect.FullName, num protowire.Number, name string) string {
	theirs := "of another type"
	if md := findMessage(f, parent, map[string]bool{}); md != nil {
		if fd := md.Fields().ByNumber(num); fd != nil {
			theirs = typeName(fd)
		}
	}
	return fmt.Sprintf("%s.%s (number %d) is %s in it", parent, name, num, article(theirs))
}

// typeName names the type of a field as a .proto declares it: "uint32",
// "repeated string", "google.protobuf.Duration".
func typeName(fd protoreflect.FieldDescriptor) string {
	t := fd.Kind().String()
	switch {
	case fd.Message() != nil:
		t = string(fd.Message().FullName())
	case fd.Enum() != nil:
		t = string(fd.Enum().FullName())
	}
	if fd.IsList() {
		return "repeated " + t
	}
	return t
}

// article puts "a" or "an" before a type name ("a string", "an int32",
// "a uint32", said "you-int"); a repeated field is "a repeated string", a
// phrase as "of another type" is left as it is.
func article(t string) string {
	switch {
	case strings.HasPrefix(t, "of "):
		return t
	case strings.ContainsAny(t[:1], "aeio"):
		return "an " + t
	}
	return "a " + t
}

// Policy is the options message the three extensions hold.
type Policy = resilientv1.Policy

// unknownFields calls found for every unknown field of m and of the
// messages set in it, with the path of field names that leads to it and
// the full name of the message that holds it.
func unknownFields(m protoreflect.Message, path []string, found func(path []string, num protowire.Number, parent protoreflect.FullName)) {
	for _, num := range unknownNumbers(m) {
		found(path, num, m.Descriptor().FullName())
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

// unknownNumbers is the field number of each unknown field of m, once
// each, in the order of its bytes, up to the first that does not parse. A
// field is on the wire once a value of a list (each string, each message)
// and once a piece of a message written part by part, yet it is one value
// written in the file, found once.
func unknownNumbers(m protoreflect.Message) []protowire.Number {
	var out []protowire.Number
	for b := m.GetUnknown(); len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			break
		}
		if !slices.Contains(out, num) {
			out = append(out, num)
		}
		b = b[n:]
	}
	return out
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

// newerExtensions names the resilient.v1 extensions that the options
// proto f imports defines on the options message of opts, that this
// program does not know, and that opts sets (as an unknown field: it
// could not be parsed).
func newerExtensions(f protoreflect.FileDescriptor, opts proto.Message) []protoreflect.ExtensionDescriptor {
	unknown := map[protowire.Number]bool{}
	for _, num := range unknownNumbers(opts.ProtoReflect()) {
		unknown[num] = true
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

// Unreadable is the field of b, the bytes of a policy written on an
// element of f, that makes b unreadable as this program's Policy: a
// message field of this program's contract (a Duration, a group) that
// the options proto f imports gives another type of the same wire type
// (timeout as a string), whose bytes do not parse as the message. Such a
// value does not become an unknown field: the whole option, and so the
// request that holds it, fails to parse. ok is false when b parses, or no
// such field is found.
func Unreadable(f protoreflect.FileDescriptor, b []byte) (n NewerOption, ok bool) {
	if proto.Unmarshal(b, new(Policy)) == nil {
		return NewerOption{}, false
	}
	path, fd, ok := unreadableField(b, (*Policy)(nil).ProtoReflect().Descriptor(), nil)
	if !ok {
		return NewerOption{}, false
	}
	parent, name := fd.ContainingMessage().FullName(), string(fd.Name())
	if f != nil {
		if md := findMessage(f, parent, map[string]bool{}); md != nil {
			if theirs := md.Fields().ByNumber(fd.Number()); theirs != nil {
				name = string(theirs.Name())
			}
		}
	}
	path[len(path)-1] = name
	what := fmt.Sprintf("%s.%s (number %d) is of another type in it", parent, name, fd.Number())
	if f != nil {
		what = retyped(f, parent, fd.Number(), name)
	}
	return NewerOption{Path: strings.Join(path, "."), Retyped: true, What: what,
		Expects: article(typeName(fd)), Name: string(fd.Name())}, true
}

// unreadableField finds the message field of b (a message md) whose bytes
// do not parse as its message, the deepest one, with its path of field
// names from path.
func unreadableField(b []byte, md protoreflect.MessageDescriptor, path []string) ([]string, protoreflect.FieldDescriptor, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, nil, false
		}
		if fd := md.Fields().ByNumber(num); fd != nil && fd.Message() != nil && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			p := append(append([]string(nil), path...), string(fd.Name()))
			if proto.Unmarshal(v, dynamicpb.NewMessage(fd.Message())) != nil {
				if deeper, dfd, ok := unreadableField(v, fd.Message(), p); ok {
					return deeper, dfd, true
				}
				return p, fd, true
			}
		}
		b = b[n+m:]
	}
	return nil, nil, false
}
