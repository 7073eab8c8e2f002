// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"go/token"
	"strings"
	"text/template"
	"unicode"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/go-resilient/resilient/templates"
)

const (
	contextPackage = protogen.GoImportPath("context")
	grpcPackage    = protogen.GoImportPath("google.golang.org/grpc")
	codesPackage   = protogen.GoImportPath("google.golang.org/grpc/codes")
	runtimePackage = protogen.GoImportPath("github.com/go-resilient/resilient/runtime")
	policyPackage  = protogen.GoImportPath("github.com/go-resilient/resilient/runtime/policy")
	protoPackage   = protogen.GoImportPath("google.golang.org/protobuf/proto")
)

// generateWith is the plugin: it resolves and checks the policy of every
// service of every file to generate, and writes one *_resilient.pb.go per
// file with services, and the exports o asks for (exports.go), or nothing
// when any policy is refused, or a file without services sets a
// (resilient.v1.file) option, which would apply to nothing.
func generateWith(gen *protogen.Plugin, o *exportOptions) error {
	gen.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL) | uint64(pluginpb.CodeGeneratorResponse_FEATURE_SUPPORTS_EDITIONS)
	gen.SupportedEditionsMinimum = descriptorpb.Edition_EDITION_PROTO2
	gen.SupportedEditionsMaximum = descriptorpb.Edition_EDITION_2024
	if err := o.checkParams(); err != nil {
		return err
	}

	type resolvedFile struct {
		file     *protogen.File
		services []*service
	}
	var (
		todo []resolvedFile
		ps   problems
	)
	for _, f := range gen.Files {
		if !f.Generate {
			continue
		}
		if len(f.Services) == 0 {
			// Nothing to write; but a file option there applies to
			// nothing, which the checks refuse (rules.CheckFileScope).
			checkFile(f, &ps)
			continue
		}
		checkOptionsVersion(f, &ps) // skew.go
		todo = append(todo, resolvedFile{f, resolveFile(f, &ps)})
	}
	// A name the Go package already declares (collide.go).
	hasServer := map[*protogen.Service]bool{}
	for _, r := range todo {
		for i, s := range r.file.Services {
			hasServer[s] = r.services[i].Server != nil // resolveFile resolves every service, in order
		}
	}
	if collisions := checkGoNames(gen, hasServer); len(collisions) > 0 {
		return errors.New(joinLines(ps.err(), collisions))
	}
	if err := ps.err(); err != nil {
		return err
	}
	for _, r := range todo {
		if err := generateFile(gen, r.file, r.services); err != nil {
			return err
		}
		if err := writeExports(gen, r.file, r.services, o); err != nil {
			return err
		}
	}
	return nil
}

// The data of the templates.
type (
	fileData struct {
		HeaderComments  string
		PluginVersion   string
		ProtocVersion   string
		Source          string
		Deprecated      bool
		PackageComments string
		GoPackageName   protogen.GoPackageName
		Services        []*serviceData
	}
	serviceData struct {
		GoName          string // as protoc-gen-go-grpc names the service
		ClientType      string
		RuntimeAccessor string
		Comments        string
		Deprecated      bool
		// FirstUnary is the name of the first unary method, the example of
		// the options' doc; "" for a service of streams only.
		FirstUnary string
		// The service's resolution: Policy, the client's policy, and
		// Server, the server-side one (nil for none).
		*service
		Methods []*methodData
	}
	methodData struct {
		Index  int
		GoName string
		// FullMethodName is the name of protoc-gen-go-grpc's constant
		// holding the method's full name: InventoryService_GetStock_FullMethodName.
		FullMethodName  string
		Field           string // the client's field holding the method's runtime handle
		Doc             string
		Input, Output   protogen.GoIdent
		Unary           bool
		ClientStreaming bool
		ServerStreaming bool
		// The method's resolution: Policy, its entry of the service's
		// policy; Key and CacheKeys, how to read its keys from the request.
		*method
	}
)

// generateFile renders f's *_resilient.pb.go. It renders it twice: first
// into a file it then drops, to learn the names the file imports packages
// under (protogen names an import after its path's last element, so a
// request type of a package at …/rt is rt.Req), then for good, with the
// generated code's locals named apart from them (local), so that no local
// hides an import the code after it spells a type with. Names are given in
// the order they are first asked for, the same in both renderings.
func generateFile(gen *protogen.Plugin, f *protogen.File, services []*service) error {
	name := f.GeneratedFilenamePrefix + "_resilient.pb.go"
	scratch := gen.NewGeneratedFile(name, f.GoImportPath)
	scratch.Skip()
	imported := map[string]bool{}
	if err := renderFile(gen, scratch, f, services, imported, nil); err != nil {
		return err
	}
	return renderFile(gen, gen.NewGeneratedFile(name, f.GoImportPath), f, services, nil, imported)
}

// renderFile renders f into g, adding to imported (when not nil) each name
// an import is spelt with, and naming the locals apart from avoid.
func renderFile(gen *protogen.Plugin, g *protogen.GeneratedFile, f *protogen.File, services []*service, imported, avoid map[string]bool) error {
	t, err := templates.New(funcs(g, imported, avoid))
	if err != nil {
		return fmt.Errorf("protoc-gen-go-resilient: parsing templates: %w", err)
	}
	const (
		syntaxField  = 12 // google.protobuf.FileDescriptorProto.syntax
		packageField = 2  // google.protobuf.FileDescriptorProto.package
	)
	data := &fileData{
		HeaderComments:  leadingComments(f.Desc.SourceLocations().ByPath(protoreflect.SourcePath{syntaxField})),
		PluginVersion:   version,
		ProtocVersion:   protocVersion(gen),
		Source:          f.Desc.Path(),
		Deprecated:      f.Proto.GetOptions().GetDeprecated(),
		PackageComments: leadingComments(f.Desc.SourceLocations().ByPath(protoreflect.SourcePath{packageField})),
		GoPackageName:   f.GoPackageName,
	}
	for i, s := range f.Services {
		data.Services = append(data.Services, serviceDataOf(g, s, services[i]))
	}
	if err := t.ExecuteTemplate(g, templates.Main, data); err != nil {
		return fmt.Errorf("protoc-gen-go-resilient: rendering %s: %w", f.Desc.Path(), err)
	}
	return nil
}

func serviceDataOf(g *protogen.GeneratedFile, s *protogen.Service, sp *service) *serviceData {
	sd := &serviceData{
		GoName:          s.GoName,
		ClientType:      s.GoName + "ResilientClient",
		RuntimeAccessor: "Runtime",
		Comments:        strings.TrimSpace(s.Comments.Leading.String()),
		Deprecated:      s.Desc.Options().(*descriptorpb.ServiceOptions).GetDeprecated(),
		service:         sp,
	}
	g.AnnotateSymbol(sd.ClientType, protogen.Annotation{Location: s.Location})
	// The client's own fields and accessor must not collide with the
	// methods it implements or with each other.
	taken := map[string]bool{"rt": true}
	methods := map[string]bool{}
	for _, m := range s.Methods {
		methods[m.GoName] = true
	}
	// Runtime, else ResilientRuntime, else ResilientRuntime_, … : the
	// first that no method takes.
	if methods[sd.RuntimeAccessor] {
		sd.RuntimeAccessor = "ResilientRuntime"
	}
	for methods[sd.RuntimeAccessor] {
		sd.RuntimeAccessor += "_"
	}
	for i, m := range s.Methods {
		field := unexport(m.GoName)
		for taken[field] || token.IsKeyword(field) {
			field += "_"
		}
		taken[field] = true
		unary := !m.Desc.IsStreamingClient() && !m.Desc.IsStreamingServer()
		if unary && sd.FirstUnary == "" {
			sd.FirstUnary = m.GoName
		}
		sd.Methods = append(sd.Methods, &methodData{
			Index:  i,
			GoName: m.GoName,
			// As protoc-gen-go-grpc names it, in the same Go package.
			FullMethodName:  s.GoName + "_" + m.GoName + "_FullMethodName",
			Field:           field,
			Doc:             methodDoc(s, m),
			Input:           m.Input.GoIdent,
			Output:          m.Output.GoIdent,
			Unary:           unary,
			ClientStreaming: m.Desc.IsStreamingClient(),
			ServerStreaming: m.Desc.IsStreamingServer(),
			method:          sp.methods[i],
		})
		g.AnnotateSymbol(sd.ClientType+"."+m.GoName, protogen.Annotation{Location: m.Location})
	}
	return sd
}

// methodDoc is the doc comment of a client method: the method's comment in
// the .proto file, as protoc-gen-go-grpc copies it, and its deprecation.
func methodDoc(s *protogen.Service, m *protogen.Method) string {
	doc := m.Comments.Leading.String()
	if doc == "" {
		doc = fmt.Sprintf("// %s calls %s.%s under its policy.\n", m.GoName, s.GoName, m.GoName)
	}
	if m.Desc.Options().(*descriptorpb.MethodOptions).GetDeprecated() {
		doc += "//\n// Deprecated: Do not use.\n"
	}
	return doc
}

// funcs returns the template functions for one generated file; every
// identifier of another package goes through g, which owns the imports.
// Each qualified name's package part is added to imported (when not nil),
// and local names a local apart from avoid.
func funcs(g *protogen.GeneratedFile, imported, avoid map[string]bool) template.FuncMap {
	qualified := func(id protogen.GoIdent) string {
		q := g.QualifiedGoIdent(id)
		if pkg, _, ok := strings.Cut(q, "."); ok && imported != nil {
			imported[pkg] = true
		}
		return q
	}
	return template.FuncMap{
		"ident":   qualified,
		"rt":      func(name string) string { return qualified(runtimePackage.Ident(name)) },
		"grpc":    func(name string) string { return qualified(grpcPackage.Ident(name)) },
		"context": func(name string) string { return qualified(contextPackage.Ident(name)) },
		"local": func(name string) string {
			for avoid[name] {
				name += "_"
			}
			return name
		},
		"literal": func(v any, code ...map[string]string) (string, error) {
			switch len(code) {
			case 0:
				return literal(g, v, nil)
			case 1:
				return literal(g, v, code[0])
			}
			return "", fmt.Errorf("protoc-gen-go-resilient: literal takes at most one map of code, got %d", len(code))
		},
		"newResponses": func(sd *serviceData) map[string]string { return newResponses(g, sd) },
	}
}

// newResponses holds the NewResponse func of each method of the server
// policy of sd that has dedup (which keeps its responses), by its path in
// the policy: "Methods[0].NewResponse".
func newResponses(g *protogen.GeneratedFile, sd *serviceData) map[string]string {
	code := map[string]string{}
	for i, m := range sd.Server.Methods {
		if m.Dedup == nil {
			continue
		}
		code[fmt.Sprintf("Methods[%d].NewResponse", i)] = "func() " + g.QualifiedGoIdent(protoPackage.Ident("Message")) +
			" { return new(" + g.QualifiedGoIdent(sd.Methods[i].Output) + ") }"
	}
	return code
}

// unexport lower-cases the leading capital, or the leading initialism, of
// a Go name: GetStock → getStock, URLFetch → urlFetch.
func unexport(s string) string {
	r := []rune(s)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) && unicode.IsLower(r[n]) {
		n-- // the last capital starts the next word
	}
	for i := 0; i < n; i++ {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

// leadingComments renders the comments before a declaration, detached ones
// included, as protoc-gen-go-grpc does for the syntax and package lines.
func leadingComments(loc protoreflect.SourceLocation) string {
	var b strings.Builder
	for _, c := range loc.LeadingDetachedComments {
		b.WriteString(protogen.Comments(c).String())
		b.WriteString("\n")
	}
	if c := loc.LeadingComments; c != "" {
		b.WriteString(protogen.Comments(c).String())
		b.WriteString("\n")
	}
	return b.String()
}

func protocVersion(gen *protogen.Plugin) string {
	v := gen.Request.GetCompilerVersion()
	if v == nil {
		return "(unknown)"
	}
	suffix := ""
	if s := v.GetSuffix(); s != "" {
		suffix = "-" + s
	}
	return fmt.Sprintf("v%d.%d.%d%s", v.GetMajor(), v.GetMinor(), v.GetPatch(), suffix)
}
