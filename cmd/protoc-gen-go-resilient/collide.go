// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
)

// checkGoNames refuses, before anything is written, a service whose
// generated package-level names (XResilientClient, NewXResilientClient,
// XResilientOptions, XResilientPolicy, XServerPolicy) are also declared in
// the same Go package: by this plugin for another service, by
// protoc-gen-go-grpc (a service named XResilient declares
// XResilientClient and NewXResilientClient) or by protoc-gen-go (a message
// or enum named XResilientPolicy, a oneof field's wrapper type, an
// extension's E_ variable). The Go would not compile, and renaming
// the generated names would break the API users call, so the .proto has
// to rename one of the two. It returns one line per collision, at the
// service. hasServer tells the services with a server-side policy.
func checkGoNames(gen *protogen.Plugin, hasServer map[*protogen.Service]bool) []string {
	// Who declares each name, per Go package, from every file of the
	// request of that package (generated or not: its Go is in the package).
	declared := map[protogen.GoImportPath]map[string]string{}
	declare := func(pkg protogen.GoImportPath, name, by string) {
		if declared[pkg] == nil {
			declared[pkg] = map[string]string{}
		}
		if _, ok := declared[pkg][name]; !ok {
			declared[pkg][name] = by
		}
	}
	var walkMessages func(pkg protogen.GoImportPath, file string, ms []*protogen.Message)
	walkEnums := func(pkg protogen.GoImportPath, file string, es []*protogen.Enum) {
		for _, e := range es {
			declare(pkg, e.GoIdent.GoName, fmt.Sprintf("protoc-gen-go for enum %s (%s)", e.Desc.FullName(), file))
			for _, v := range e.Values {
				declare(pkg, v.GoIdent.GoName, fmt.Sprintf("protoc-gen-go for enum value %s (%s)", v.Desc.FullName(), file))
			}
		}
	}
	// An extension is a variable E_<its Go name>.
	walkExtensions := func(pkg protogen.GoImportPath, file string, xs []*protogen.Extension) {
		for _, x := range xs {
			declare(pkg, "E_"+x.GoIdent.GoName, fmt.Sprintf("protoc-gen-go for extension %s (%s)", x.Desc.FullName(), file))
		}
	}
	walkMessages = func(pkg protogen.GoImportPath, file string, ms []*protogen.Message) {
		for _, m := range ms {
			declare(pkg, m.GoIdent.GoName, fmt.Sprintf("protoc-gen-go for message %s (%s)", m.Desc.FullName(), file))
			// A field of a oneof is a wrapper type, Message_Field: the
			// message M's oneof field b_resilient_policy is
			// M_BResilientPolicy, the policy of a service M_B.
			for _, fld := range m.Fields {
				if fld.Oneof != nil && !fld.Oneof.Desc.IsSynthetic() {
					declare(pkg, fld.GoIdent.GoName, fmt.Sprintf("protoc-gen-go for oneof field %s (%s)", fld.Desc.FullName(), file))
				}
			}
			walkEnums(pkg, file, m.Enums)
			walkExtensions(pkg, file, m.Extensions)
			walkMessages(pkg, file, m.Messages)
		}
	}
	for _, f := range gen.Files {
		pkg, file := f.GoImportPath, f.Desc.Path()
		walkEnums(pkg, file, f.Enums)
		walkExtensions(pkg, file, f.Extensions)
		walkMessages(pkg, file, f.Messages)
		for _, s := range f.Services {
			by := fmt.Sprintf("protoc-gen-go-grpc for service %s (%s)", s.Desc.FullName(), file)
			for _, n := range []string{s.GoName + "Client", "New" + s.GoName + "Client", s.GoName + "Server",
				"Unimplemented" + s.GoName + "Server", "Unsafe" + s.GoName + "Server", "Register" + s.GoName + "Server",
				s.GoName + "_ServiceDesc"} {
				declare(pkg, n, by)
			}
			for _, m := range s.Methods {
				for _, n := range []string{s.GoName + "_" + m.GoName + "_FullMethodName",
					s.GoName + "_" + m.GoName + "Client", s.GoName + "_" + m.GoName + "Server"} {
					declare(pkg, n, by)
				}
			}
		}
	}
	var lines []string
	for _, f := range gen.Files {
		if !f.Generate {
			continue
		}
		for _, s := range f.Services {
			for _, n := range resilientNames(s, hasServer[s]) {
				by, ok := declared[f.GoImportPath][n]
				if !ok {
					declare(f.GoImportPath, n, fmt.Sprintf("protoc-gen-go-resilient for service %s (%s)", s.Desc.FullName(), f.Desc.Path()))
					continue
				}
				lines = append(lines, fmt.Sprintf("%s: %s: its resilient client declares %s, which %s declares too, in Go package %s: the Go would not compile; rename one of the two in the .proto",
					position(f, f.Desc.SourceLocations().ByDescriptor(s.Desc)), s.Desc.FullName(), n, by, f.GoImportPath))
			}
		}
	}
	return lines
}

// resilientNames are the package-level names this plugin declares for s
// (client.tmpl, policy.tmpl), and server.tmpl's when it has a server-side
// policy.
func resilientNames(s *protogen.Service, server bool) []string {
	names := []string{s.GoName + "ResilientOptions", s.GoName + "ResilientClient", "New" + s.GoName + "ResilientClient",
		s.GoName + "ResilientPolicy"}
	if server {
		names = append(names, s.GoName+"ServerPolicy")
	}
	return names
}

// joinLines joins the problems' error and the collisions into one error's
// text, one line each.
func joinLines(err error, lines []string) string {
	if err != nil {
		lines = append([]string{err.Error()}, lines...)
	}
	return strings.Join(lines, "\n")
}
