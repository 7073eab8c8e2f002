// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// Package templates holds the Go text/templates that protoc-gen-go-resilient
// renders into *_resilient.pb.go files.
//
// The templates never name another Go package themselves: every foreign
// identifier goes through a function the generator supplies (ident, rt,
// pol, grpc, context, codes, …), which resolves it with protogen's
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
	// pol returns the named identifier of the runtime/policy package, the
	// policy values.
	"pol": unset,
	// kind returns the runtime/policy constant of a policy.Kind:
	// policy.KindUnary.
	"kind": unset,
	// priority returns the runtime/policy constant of a policy.Priority:
	// policy.PriorityHigh.
	"priority": unset,
	// storeErrorMode returns the runtime/policy constant of a
	// policy.StoreErrorMode: policy.StoreErrorRefuse.
	"storeErrorMode": unset,
	// grpc returns the named identifier of google.golang.org/grpc.
	"grpc": unset,
	// context returns the named identifier of package context.
	"context": unset,
	// codes returns the policy.CodesOf call that makes a policy.CodeSet,
	// its codes in the order of their numbers.
	"codes": unset,
	// proto returns the named identifier of google.golang.org/protobuf/proto.
	"proto": unset,
	// code returns one codes.Code constant.
	"code": unset,
	// dur returns a time.Duration as a Go expression with its unit:
	// 300 * time.Millisecond.
	"dur": unset,
	// float returns a float64 as the shortest Go literal that holds it.
	"float": unset,
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
