// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// site is a place in a .proto file that a problem is reported at: the
// file, a service or a method.
type site struct {
	pos  string // "path/to/file.proto:LINE:COL", 1-based like protoc's own errors
	name string // "pkg.Service.Method", "pkg.Service" or the file's package
	file *protogen.File
	// options holds, for each level whose option concerns the site, the
	// source path of that option: the file's, the service's, the
	// method's (resilient.v1.*) extension.
	options map[rules.Level]protoreflect.SourcePath
}

// The source paths of the options: rules.OptionsPath and optionsNumber
// (skew.go).

func fileOptionPath() protoreflect.SourcePath {
	return append(rules.OptionsPath(rules.LevelFile, 0, 0), optionsNumber)
}

func serviceOptionPath(s *protogen.Service) protoreflect.SourcePath {
	return append(rules.OptionsPath(rules.LevelService, s.Desc.Index(), 0), optionsNumber)
}

func methodOptionPath(m *protogen.Method) protoreflect.SourcePath {
	return append(rules.OptionsPath(rules.LevelMethod, m.Parent.Desc.Index(), m.Desc.Index()), optionsNumber)
}

// fileSite is the place of file-level problems: the syntax or edition
// statement, else the first line.
func fileSite(f *protogen.File) site {
	const (
		syntaxField  = 12 // google.protobuf.FileDescriptorProto.syntax
		editionField = 14 // google.protobuf.FileDescriptorProto.edition
	)
	locs := f.Desc.SourceLocations()
	loc := locs.ByPath(protoreflect.SourcePath{syntaxField})
	if loc.Path == nil {
		loc = locs.ByPath(protoreflect.SourcePath{editionField})
	}
	return site{pos: position(f, loc), name: string(f.Desc.Package()), file: f,
		options: map[rules.Level]protoreflect.SourcePath{rules.LevelFile: fileOptionPath()}}
}

func serviceSite(f *protogen.File, s *protogen.Service) site {
	return site{pos: position(f, f.Desc.SourceLocations().ByDescriptor(s.Desc)), name: string(s.Desc.FullName()), file: f,
		options: map[rules.Level]protoreflect.SourcePath{rules.LevelFile: fileOptionPath(), rules.LevelService: serviceOptionPath(s)}}
}

func methodSite(f *protogen.File, m *protogen.Method) site {
	return site{pos: position(f, f.Desc.SourceLocations().ByDescriptor(m.Desc)), name: string(m.Desc.FullName()), file: f,
		options: map[rules.Level]protoreflect.SourcePath{rules.LevelFile: fileOptionPath(), rules.LevelService: serviceOptionPath(m.Parent),
			rules.LevelMethod: methodOptionPath(m)}}
}

// sitesOf returns the site of each element of f that a finding is
// reported at: its services and methods, and the file for anything else.
func sitesOf(f *protogen.File) func(protoreflect.Descriptor) site {
	sites := map[protoreflect.FullName]site{}
	for _, s := range f.Services {
		sites[s.Desc.FullName()] = serviceSite(f, s)
		for _, m := range s.Methods {
			sites[m.Desc.FullName()] = methodSite(f, m)
		}
	}
	file := fileSite(f)
	return func(d protoreflect.Descriptor) site {
		at, ok := sites[d.FullName()]
		if _, isFile := d.(protoreflect.FileDescriptor); isFile || !ok {
			return file
		}
		return at
	}
}

// position formats a source location; a missing one (no source info) is
// the start of the file.
func position(f *protogen.File, loc protoreflect.SourceLocation) string {
	if loc.Path == nil {
		return fmt.Sprintf("%s:1:1", f.Desc.Path())
	}
	return fmt.Sprintf("%s:%d:%d", f.Desc.Path(), loc.StartLine+1, loc.StartColumn+1)
}

// valuePosition returns the position of the value at path
// ("retry.retryable_codes[1]") in the option of level lvl: the deepest
// place the source info has, which is the option statement for an option
// written as one message ({...}) and the field itself for one written
// field by field (option (resilient.v1.method).retry.max_attempts = 0);
// the site's own position when the source info has neither.
func (at site) valuePosition(lvl rules.Level, path string) string {
	base, ok := at.options[lvl]
	if !ok || at.file == nil {
		return at.pos
	}
	loc, ok := rules.ValueLocation(at.file.Desc.SourceLocations(), base, path)
	if !ok {
		return at.pos
	}
	return position(at.file, loc)
}

// fieldNumbers is rules.FieldNumbers.
func fieldNumbers(path string) protoreflect.SourcePath { return rules.FieldNumbers(path) }

// problem is one reason a policy is refused.
type problem struct {
	at     site
	option rules.Level // the option where the offending value was written
	path   string      // the field inside the option: "retry.max_attempts"
	msg    string      // what is wrong and how to mend it
}

func (p problem) String() string {
	var b strings.Builder
	b.WriteString(p.at.pos)
	b.WriteString(": ")
	if p.at.name != "" {
		b.WriteString(p.at.name)
		b.WriteString(": ")
	}
	b.WriteString(p.option.OptionPath(p.path))
	b.WriteString(": ")
	b.WriteString(p.msg)
	return b.String()
}

// problems collects the problems of every file of a request, so that all
// are reported together.
type problems []problem

func (ps *problems) add(at site, option rules.Level, path, format string, args ...any) {
	at.pos = at.valuePosition(option, path)
	*ps = append(*ps, problem{at: at, option: option, path: path, msg: fmt.Sprintf(format, args...)})
}

// err returns the problems as one error, one line each, or nil.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return errors.New(strings.Join(lines, "\n"))
}
