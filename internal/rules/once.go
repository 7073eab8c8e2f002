// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"google.golang.org/protobuf/reflect/protoreflect"
)

// once holds the findings of a file, in order, so that a value found
// wrong in the same words where several elements inherit it is reported
// once, naming them, rather than once an element at the same option: a
// value of a service, for several of its methods (a service's timeout
// above its overall_timeout, for each method that inherits both), at the
// service; a value of the file, for several services or methods of
// different services, at the file's option. A finding of a method's own
// option, or one that holds for a single method, is reported as it came.
type once struct {
	file  protoreflect.FileDescriptor
	found []onceFinding
	seen  map[onceKey]int // → the finding's index in found
}

// onceKey is a finding of a value above the level it was found at: of
// the file's value (service nil), or of service's value.
type onceKey struct {
	f       Finding
	service protoreflect.ServiceDescriptor
}

type onceFinding struct {
	d  protoreflect.Descriptor
	f  Finding
	in []scope // where a finding of a value above its own level holds
}

// scope is where a finding of a value above its own level holds: a
// service, with the methods it holds for (nil: the whole service, a
// finding of the service's own checks).
type scope struct {
	service protoreflect.ServiceDescriptor
	methods []string
}

// whole reports whether the finding holds for every method of the service.
func (s scope) whole() bool { return s.methods == nil || len(s.methods) == s.service.Methods().Len() }

// add records a finding at d: the file, a service (found wrong as a
// whole: its own checks, CheckService and CheckShedding) or a method.
func (o *once) add(d protoreflect.Descriptor, f Finding) {
	var where scope
	key := onceKey{f: f}
	switch d := d.(type) {
	case protoreflect.MethodDescriptor:
		if f.Level == LevelMethod {
			o.found = append(o.found, onceFinding{d: d, f: f})
			return
		}
		s := d.Parent().(protoreflect.ServiceDescriptor)
		where = scope{s, []string{string(d.Name())}}
		if f.Level == LevelService {
			key.service = s
		}
	case protoreflect.ServiceDescriptor:
		if f.Level != LevelFile {
			o.found = append(o.found, onceFinding{d: d, f: f})
			return
		}
		where = scope{service: d}
	default:
		o.found = append(o.found, onceFinding{d: d, f: f})
		return
	}
	i, ok := o.seen[key]
	if !ok {
		if o.seen == nil {
			o.seen = map[onceKey]int{}
		}
		o.seen[key] = len(o.found)
		o.found = append(o.found, onceFinding{d: d, f: f, in: []scope{where}})
		return
	}
	of := &o.found[i]
	last := &of.in[len(of.in)-1]
	switch {
	case last.service != where.service:
		of.in = append(of.in, where)
	case last.methods == nil || where.methods == nil:
		last.methods = nil // found for the service as a whole and for its methods
	default:
		last.methods = append(last.methods, where.methods...)
	}
}

// flush reports the findings to add, in the order they came.
func (o *once) flush(add func(protoreflect.Descriptor, Finding)) {
	for _, of := range o.found {
		switch {
		case len(of.in) <= 1:
			if len(of.in) == 0 || len(of.in[0].methods) < 2 {
				add(of.d, of.f)
				continue
			}
			s, f := of.in[0], of.f
			f.Message = "in " + MethodList(s.methods, s.service.Methods().Len()) + ", " + f.Message
			add(s.service, f)
		default:
			f := of.f
			f.Message = "in " + serviceList(of.in, o.file.Services().Len()) + ", " + f.Message
			add(o.file, f)
		}
	}
}

// serviceList names where a finding of the file's value holds, in several
// services of a file of n: "Orders and Payments", "Orders.Get and
// Payments" (some of Orders' methods, every one of Payments'), "each
// service".
func serviceList(in []scope, n int) string {
	var names []string
	whole := 0
	for _, s := range in {
		if s.whole() {
			whole++
			names = append(names, string(s.service.Name()))
			continue
		}
		for _, m := range s.methods {
			names = append(names, string(s.service.Name())+"."+m)
		}
	}
	if whole == n {
		return "each service"
	}
	return AndList(names)
}
