// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	checkv1 "buf.build/gen/go/bufbuild/bufplugin/protocolbuffers/go/buf/plugin/check/v1"
	descriptorv1 "buf.build/gen/go/bufbuild/bufplugin/protocolbuffers/go/buf/plugin/descriptor/v1"
	pluginrpcv1 "buf.build/gen/go/pluginrpc/pluginrpc/protocolbuffers/go/pluginrpc/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
	"pluginrpc.com/pluginrpc"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// unreadable is what readableServer took out of the request it serves:
// per file path, the options this lint plugin cannot read. Set before the
// request is served (a process serves one), read by the rules' handlers.
var unreadable = map[string][]unreadableOption{}

// unreadableOption is one option of a file taken out of the request: the
// element that holds it (the file, a service or a method, by full name)
// and what to report there.
type unreadableOption struct {
	level   rules.Level
	element protoreflect.FullName // "" for the file
	option  rules.NewerOption
}

// readableServer serves the plugin as bufplugin does, but first takes out
// of a check request every (resilient.v1.*) option whose bytes this
// plugin's contract cannot read, for the rules to report: an options
// proto that gives a message field another type (timeout as a string)
// makes the option's bytes no resilient.v1.Policy, and bufplugin, which
// parses the request with this plugin's options linked in, failed with
// protobuf's "cannot parse invalid wire-format data", naming no file and
// checking nothing. The code generator refuses the same option at its
// place (its request.go); lint now reports it as RESILIENT_INVALID_VALUE.
type readableServer struct{ pluginrpc.Server }

func (s readableServer) Serve(ctx context.Context, env pluginrpc.Env) error {
	if !slices.Contains(env.Args, "check") || slices.ContainsFunc(env.Args, func(a string) bool { return a == "--format=json" || a == "json" }) || env.Stdin == nil {
		return s.Server.Serve(ctx, env)
	}
	b, err := io.ReadAll(env.Stdin)
	if err != nil {
		return err
	}
	b, unreadable = readableRequest(b)
	env.Stdin = bytes.NewReader(b)
	return s.Server.Serve(ctx, env)
}

// readableRequest is b, a pluginrpc request holding a check request,
// without the options this plugin cannot read, and those options per file
// path; b itself when every option reads, or b is not such a request
// (bufplugin then says what is wrong with it).
func readableRequest(b []byte) ([]byte, map[string][]unreadableOption) {
	req := new(pluginrpcv1.Request)
	if proto.Unmarshal(b, req) != nil || req.GetValue() == nil {
		return b, nil
	}
	// The options' extensions stay bytes: no resolver knows them.
	raw := proto.UnmarshalOptions{Resolver: new(protoregistry.Types)}
	check := new(checkv1.CheckRequest)
	if raw.Unmarshal(req.GetValue().GetValue(), check) != nil {
		return b, nil
	}
	if (proto.UnmarshalOptions{}).Unmarshal(req.GetValue().GetValue(), new(checkv1.CheckRequest)) == nil {
		return b, nil // it reads as it is
	}
	found := false
	taken := map[string][]unreadableOption{}
	// The files to check, and those of a breaking check's against (whose
	// options are taken out too, or the request would not parse).
	for i, set := range [][]*descriptorv1.FileDescriptor{check.GetFileDescriptors(), check.GetAgainstFileDescriptors()} {
		protos := make([]*descriptorpb.FileDescriptorProto, 0, len(set))
		for _, f := range set {
			protos = append(protos, f.GetFileDescriptorProto())
		}
		files, _ := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: protos})
		for _, fdp := range protos {
			var desc protoreflect.FileDescriptor
			if files != nil {
				desc, _ = files.FindFileByPath(fdp.GetName())
			}
			var got []unreadableOption
			for site := range rules.RawSites(fdp) {
				if n, ok := takeUnreadable(site.Options, site.Extension, desc); ok {
					n.Level = site.Level
					element := site.Name
					if site.Level == rules.LevelFile {
						element = ""
					}
					got = append(got, unreadableOption{level: site.Level, element: element, option: n})
				}
			}
			if len(got) > 0 {
				found = true
				if i == 0 {
					taken[fdp.GetName()] = append(taken[fdp.GetName()], got...)
				}
			}
		}
	}
	if !found {
		return b, nil
	}
	value, err := proto.Marshal(check)
	if err != nil {
		return b, nil
	}
	out, err := proto.Marshal(pluginrpcv1.Request_builder{Value: &anypb.Any{TypeUrl: req.GetValue().GetTypeUrl(), Value: value}}.Build())
	if err != nil {
		return b, nil
	}
	return out, taken
}

// takeUnreadable removes from opts (options whose extensions are unknown
// bytes) the value of xt that this plugin's Policy cannot read, and says
// which field of the copy f imports is to blame (rules.Unreadable).
func takeUnreadable(opts proto.Message, xt protoreflect.ExtensionType, f protoreflect.FileDescriptor) (rules.NewerOption, bool) {
	var found rules.NewerOption
	taken := false
	kept, ok := rules.FilterRaw(opts, xt.TypeDescriptor().Number(), func(v []byte) bool {
		u, bad := rules.Unreadable(f, v)
		if !bad && proto.Unmarshal(v, new(resilientv1.Policy)) != nil {
			// No field is to blame: the option's bytes themselves (a copy
			// giving the extension another type, its text read as a
			// Policy; a Policy cut short).
			u, bad = unreadablePolicy(xt), true
		}
		if bad && !taken {
			found, taken = u, true
		}
		return !bad
	})
	if !ok || !taken {
		return rules.NewerOption{}, false
	}
	opts.ProtoReflect().SetUnknown(kept)
	return found, true
}

// unreadablePolicy is the option xt whose bytes do not read as a
// resilient.v1.Policy, no field of it to blame.
func unreadablePolicy(xt protoreflect.ExtensionType) rules.NewerOption {
	xd := xt.TypeDescriptor()
	return rules.NewerOption{Retyped: true,
		What:    fmt.Sprintf("the bytes of (%s) (number %d) do not read as a resilient.v1.Policy (the option has another type in it, or its bytes are cut short)", xd.FullName(), xd.Number()),
		Expects: "a resilient.v1.Policy", Name: string(xd.Name())}
}

// unreadableOptions reports, as RESILIENT_INVALID_VALUE, the options of
// fd that readableServer took out of the request.
func unreadableOptions(fd protoreflect.FileDescriptor, add func(protoreflect.Descriptor, rules.Finding)) {
	for _, u := range unreadable[fd.Path()] {
		var d protoreflect.Descriptor = fd
		switch u.level {
		case rules.LevelService:
			sd := fd.Services().ByName(u.element.Name())
			if sd == nil {
				continue
			}
			d = sd
		case rules.LevelMethod:
			sd := fd.Services().ByName(u.element.Parent().Name())
			if sd == nil || sd.Methods().ByName(u.element.Name()) == nil {
				continue
			}
			d = sd.Methods().ByName(u.element.Name())
		}
		add(d, rules.Finding{Rule: rules.RuleInvalidValue, Level: u.level, Path: u.option.Path, Message: retypedLintMessage(u.option)})
	}
}
