// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// run is protogen.Options.Run on in and out, but for a request that does
// not parse because an option of this contract does not: protoc passes a
// string option's "\xff" escape through as it is, and a string of
// resilient.proto (proto3) must be valid UTF-8, so the whole request would
// be refused with protobuf's "string field contains invalid UTF-8", naming
// neither the file nor the option. Such a request is answered, as any
// refusal, with an error naming the file, line and column, the element and
// the option.
//
// A boolean parameter of flags written with "=" and no value (envoy=) is
// refused before protogen reads the parameters (emptyBoolParam).
func run(opts protogen.Options, flags *flag.FlagSet, args []string, in io.Reader, out io.Writer, f func(*protogen.Plugin) error) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown argument %q (this program should be run by protoc, not directly)", args[0])
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var resp *pluginpb.CodeGeneratorResponse
	req := new(pluginpb.CodeGeneratorRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		msgs := unreadableOptions(b)
		if len(msgs) == 0 {
			return fmt.Errorf("reading the request from protoc: %w", err)
		}
		resp = &pluginpb.CodeGeneratorResponse{Error: proto.String(strings.Join(msgs, "\n"))}
	} else {
		if err := emptyBoolParam(req.GetParameter(), flags); err != nil {
			return err
		}
		gen, err := opts.New(req)
		if err != nil {
			return err
		}
		if err := f(gen); err != nil {
			gen.Error(err)
		}
		resp = gen.Response()
	}
	b, err = proto.Marshal(resp)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// unreadableOptions reads the request b without the options' extensions
// (so that they stay bytes), and returns a refusal for each option of this
// contract holding a string that is not valid UTF-8: none when the request
// does not parse even so, or every option reads.
func unreadableOptions(b []byte) []string {
	req := new(pluginpb.CodeGeneratorRequest)
	if err := (proto.UnmarshalOptions{Resolver: new(protoregistry.Types)}).Unmarshal(b, req); err != nil {
		return nil
	}
	// The files as descriptors, to name a field's type in the copy of the
	// options a file imports (rules.Unreadable); without them, the field
	// is said to be of another type.
	files, _ := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: req.GetProtoFile()})
	var out []string
	for _, fd := range req.GetProtoFile() {
		c := optionChecker{file: fd}
		if files != nil {
			c.desc, _ = files.FindFileByPath(fd.GetName())
		}
		for site := range rules.RawSites(fd) {
			c.check(site.Options, site.Extension, site.Path, string(site.Name))
		}
		for i, md := range fd.GetMessageType() {
			c.message(md, protoreflect.SourcePath{messageTypeField, int32(i)}, join(fd.GetPackage(), md.GetName()))
		}
		out = append(out, c.found...)
	}
	return out
}

// The numbers of descriptor.proto for the options of a message's fields (those of
// a policy's options: rules.OptionsPath).
const (
	messageTypeField    = 4 // FileDescriptorProto.message_type
	messageFieldField   = 2 // DescriptorProto.field
	nestedTypeField     = 3 // DescriptorProto.nested_type
	fieldOptionsField   = 8 // FieldDescriptorProto.options
	defaultValueOptName = "(resilient.v1.default_value)"
)

// optionChecker finds the unreadable options of one file.
type optionChecker struct {
	file  *descriptorpb.FileDescriptorProto
	desc  protoreflect.FileDescriptor // file, nil when it does not build
	found []string
}

func join(pkg, name string) string {
	if pkg == "" {
		return name
	}
	return pkg + "." + name
}

// message checks the options of the fields of md, at path, and of its
// nested messages.
func (c *optionChecker) message(md *descriptorpb.DescriptorProto, path protoreflect.SourcePath, name string) {
	for i, fl := range md.GetField() {
		c.check(fl.GetOptions(), resilientv1.E_DefaultValue, append(append(protoreflect.SourcePath(nil), path...), messageFieldField, int32(i), fieldOptionsField), name+"."+fl.GetName())
	}
	for i, nested := range md.GetNestedType() {
		c.message(nested, append(append(protoreflect.SourcePath(nil), path...), nestedTypeField, int32(i)), name+"."+nested.GetName())
	}
}

// check reports the string of xt's value in opts (the options at path of
// the element called name) that is not valid UTF-8, if any.
func (c *optionChecker) check(opts proto.Message, xt protoreflect.ExtensionType, path protoreflect.SourcePath, name string) {
	xd := xt.TypeDescriptor()
	opt := "(" + string(xd.FullName()) + ")"
	where := append(append(protoreflect.SourcePath(nil), path...), int32(xd.Number()))
	found := false
	rules.FilterRaw(opts, xd.Number(), func(v []byte) bool {
		if found {
			return true
		}
		field, numbers, text, bad := "", protoreflect.SourcePath(nil), v, !utf8.Valid(v)
		if xd.Kind() == protoreflect.MessageKind {
			field, numbers, text, bad = badString(v, xd.Message())
		}
		switch {
		case bad:
			c.found = append(c.found, fmt.Sprintf("%s: %s: %s%s: is not valid UTF-8 (%q): a string of the options must be text; write the characters themselves, not byte escapes",
				c.position(append(where, numbers...)), name, opt, field, text))
			found = true
		case xd.Message() == policyDescriptor:
			// A field the copy of the options gives another type, whose
			// bytes are not this plugin's message.
			if n, ok := rules.Unreadable(c.desc, v); ok {
				c.found = append(c.found, fmt.Sprintf("%s: %s: %s.%s: %s", c.position(append(where, unreadableNumbers(n)...)), name, opt, n.Path, retypedMessage(n)))
				found = true
			}
		}
		return true
	})
}

// badString returns the path (".retry.retryable_codes[1]"), the source
// path and the bytes of the first string of b, a message md, that is not
// valid UTF-8, and whether there is one.
func badString(b []byte, md protoreflect.MessageDescriptor) (string, protoreflect.SourcePath, []byte, bool) {
	seen := map[protowire.Number]int32{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", nil, nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return "", nil, nil, false
		}
		fd := md.Fields().ByNumber(num)
		if fd != nil && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			name := "." + string(fd.Name())
			numbers := protoreflect.SourcePath{int32(num)}
			if fd.IsList() {
				name += fmt.Sprintf("[%d]", seen[num])
				numbers = append(numbers, seen[num])
			}
			switch {
			case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
				return name, numbers, v, true
			case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
				if inner, innerNumbers, text, bad := badString(v, fd.Message()); bad {
					return name + inner, append(numbers, innerNumbers...), text, true
				}
			}
		}
		seen[num]++
		b = b[n+m:]
	}
	return "", nil, nil, false
}

// position is the place in c.file of the deepest source location on the
// way to want: the value itself when protoc recorded it, else the option
// statement, else the element; the file's start without source info.
func (c *optionChecker) position(want protoreflect.SourcePath) string {
	best, bestLen := (*descriptorpb.SourceCodeInfo_Location)(nil), -1
	for _, loc := range c.file.GetSourceCodeInfo().GetLocation() {
		p := loc.GetPath()
		if len(p) > len(want) || len(p) <= bestLen {
			continue
		}
		if slices.Equal(p, want[:len(p)]) { // on the way to want
			best, bestLen = loc, len(p)
		}
	}
	if best == nil || len(best.GetSpan()) < 2 {
		return c.file.GetName() + ":1:1"
	}
	return fmt.Sprintf("%s:%d:%d", c.file.GetName(), best.GetSpan()[0]+1, best.GetSpan()[1]+1)
}

// policyDescriptor is the message the three extensions hold.
var policyDescriptor = resilientv1.E_Method.TypeDescriptor().Message()

// unreadableNumbers is the source path, inside the option, of the field n
// names (n.Path, in the names of the copy; the last as this plugin names
// it, n.Name), as far as this plugin's contract has it.
func unreadableNumbers(n rules.NewerOption) protoreflect.SourcePath {
	names := strings.Split(n.Path, ".")
	names[len(names)-1] = n.Name
	return fieldNumbers(strings.Join(names, "."))
}
