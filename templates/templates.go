// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package templates holds the Go text/templates that protoc-gen-go-resilient
// renders into *_resilient.pb.go files.
//
// The templates never name another Go package themselves: every foreign
// identifier goes through a function the generator supplies (ident, rt,
// grpc, context, literal, …), which resolves it with protogen's
// QualifiedGoIdent, so that protogen owns the imports of the generated file.
package templates

import (
	"embed"
	"text/template"
)

//go:embed *.tmpl
var files embed.FS

// Funcs lists the functions the templates call. A generator must supply
// every one of them to New; the values here only describe them.
var Funcs = template.FuncMap{
	// ident returns a protogen.GoIdent as the generated file must spell it.
	"ident": unset,
	// rt returns the named identifier of the resilient runtime package.
	"rt": unset,
	// grpc returns the named identifier of google.golang.org/grpc.
	"grpc": unset,
	// context returns the named identifier of package context.
	"context": unset,
	// literal returns a runtime/policy value as the Go composite literal
	// of its type, every field it holds; its optional second argument
	// holds the Go expressions of fields a value cannot hold as data (a
	// func), by their path in it: "Methods[0].NewResponse".
	"literal": unset,
	// local returns the name of a local variable of the generated code,
	// "rt" for "rt", or the name with "_" appended when the generated file
	// imports a package under that name (a request type of a package whose
	// import path ends in /rt), which the local would hide.
	"local": unset,
	// newResponses returns the NewResponse funcs of a service's server
	// policy, by their path in it, for literal.
	"newResponses": unset,
}

func unset(...any) (string, error) {
	panic("templates: function not supplied to templates.New")
}

// Main is the name of the template that renders a whole file.
const Main = "file"

// New parses the templates with the given functions, which must hold every
// name of Funcs.
func New(funcs template.FuncMap) (*template.Template, error) {
	t := template.New(Main).Option("missingkey=error")
	return t.Funcs(Funcs).Funcs(funcs).ParseFS(files, "*.tmpl")
}
