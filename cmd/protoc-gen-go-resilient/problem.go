// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// site is a place in a .proto file that a problem is reported at: the
// file, a service or a method.
type site struct {
	pos  string // "path/to/file.proto:LINE:COL", 1-based like protoc's own errors
	name string // "pkg.Service.Method", "pkg.Service" or the file's package
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
	return site{pos: position(f, loc), name: string(f.Desc.Package())}
}

func serviceSite(f *protogen.File, s *protogen.Service) site {
	return site{pos: position(f, f.Desc.SourceLocations().ByDescriptor(s.Desc)), name: string(s.Desc.FullName())}
}

func methodSite(f *protogen.File, m *protogen.Method) site {
	return site{pos: position(f, f.Desc.SourceLocations().ByDescriptor(m.Desc)), name: string(m.Desc.FullName())}
}

// position formats a source location; a missing one (no source info) is
// the start of the file.
func position(f *protogen.File, loc protoreflect.SourceLocation) string {
	if loc.Path == nil {
		return fmt.Sprintf("%s:1:1", f.Desc.Path())
	}
	return fmt.Sprintf("%s:%d:%d", f.Desc.Path(), loc.StartLine+1, loc.StartColumn+1)
}

// problem is one reason a policy is refused.
type problem struct {
	at     site
	option level  // the option where the offending value was written
	path   string // the field inside the option: "retry.max_attempts"
	msg    string // what is wrong and how to mend it
}

func (p problem) String() string {
	var b strings.Builder
	b.WriteString(p.at.pos)
	b.WriteString(": ")
	if p.at.name != "" {
		b.WriteString(p.at.name)
		b.WriteString(": ")
	}
	b.WriteString(p.option.option())
	if p.path != "" {
		b.WriteString(".")
		b.WriteString(p.path)
	}
	b.WriteString(": ")
	b.WriteString(p.msg)
	return b.String()
}

// problems collects the problems of every file of a request, so that all
// are reported together.
type problems []problem

func (ps *problems) add(at site, option level, path, format string, args ...any) {
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
