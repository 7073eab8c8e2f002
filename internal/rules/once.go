// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"google.golang.org/protobuf/reflect/protoreflect"
)

// oncePerService holds the findings of the methods of one service, in
// order, so that a value of the service or the file found wrong in the
// same words for several of its methods (a service's timeout above its
// overall_timeout, for each method that inherits both) is reported once,
// at the service, naming them, rather than once a method at the same
// option. A finding of a method's own option, or one for a single method,
// is reported as it came.
type oncePerService struct {
	service protoreflect.ServiceDescriptor
	found   []onceFinding
	seen    map[Finding]int // a finding of a method above its own level → its index in found
}

type onceFinding struct {
	d       protoreflect.Descriptor
	f       Finding
	methods []string // the methods a finding above their own level holds for
}

// add records a finding at d, a method of the service.
func (o *oncePerService) add(d protoreflect.Descriptor, f Finding) {
	m, isMethod := d.(protoreflect.MethodDescriptor)
	if !isMethod || f.Level == LevelMethod {
		o.found = append(o.found, onceFinding{d: d, f: f})
		return
	}
	if i, ok := o.seen[f]; ok {
		o.found[i].methods = append(o.found[i].methods, string(m.Name()))
		return
	}
	if o.seen == nil {
		o.seen = map[Finding]int{}
	}
	o.seen[f] = len(o.found)
	o.found = append(o.found, onceFinding{d: d, f: f, methods: []string{string(m.Name())}})
}

// flush hands the findings to file, in the order they came.
func (o *oncePerService) flush(file *oncePerFile) {
	for _, of := range o.found {
		file.addIn(o.service, of)
	}
}

// oncePerFile holds the findings of a file, in order, so that a value of
// the file found wrong in the same words for several of its services (a
// file's timeout above its overall_timeout, for each service that
// inherits both) is reported once, at the file's option, naming them,
// rather than once a service at the same option. A finding for one service
// is reported as oncePerService words it.
type oncePerFile struct {
	file  protoreflect.FileDescriptor
	found []fileFinding
	seen  map[Finding]int // a finding of the file's value, at a service or method → its index in found
}

type fileFinding struct {
	d  protoreflect.Descriptor
	f  Finding
	in []scope // the services (and methods) a finding of the file's value holds for
}

// scope is where a finding of the file's value holds: a service, with the
// methods it holds for (the whole service: all of them, or a finding of
// the service's own checks).
type scope struct {
	service protoreflect.ServiceDescriptor
	methods []string // nil: the whole service
}

// whole reports whether the finding holds for every method of the service.
func (s scope) whole() bool { return s.methods == nil || len(s.methods) == s.service.Methods().Len() }

// add records a finding at d: the file, or a service found wrong as a
// whole (its own checks, CheckService and CheckShedding).
func (o *oncePerFile) add(d protoreflect.Descriptor, f Finding) {
	s, isService := d.(protoreflect.ServiceDescriptor)
	if !isService {
		o.found = append(o.found, fileFinding{d: d, f: f})
		return
	}
	o.addIn(s, onceFinding{d: d, f: f})
}

// addIn records a finding of service s's methods (or of s itself).
func (o *oncePerFile) addIn(s protoreflect.ServiceDescriptor, of onceFinding) {
	if of.f.Level != LevelFile {
		o.found = append(o.found, fileFinding{d: of.d, f: of.f, in: []scope{{s, of.methods}}})
		return
	}
	where := scope{s, of.methods}
	if _, isService := of.d.(protoreflect.ServiceDescriptor); isService {
		where.methods = nil
	}
	if i, ok := o.seen[of.f]; ok {
		ff := &o.found[i]
		if last := &ff.in[len(ff.in)-1]; last.service == s {
			// Found for the service as a whole and for its methods.
			if where.methods == nil || last.methods == nil {
				last.methods = nil
			} else {
				last.methods = append(last.methods, where.methods...)
			}
			return
		}
		ff.in = append(ff.in, where)
		return
	}
	if o.seen == nil {
		o.seen = map[Finding]int{}
	}
	o.seen[of.f] = len(o.found)
	o.found = append(o.found, fileFinding{d: of.d, f: of.f, in: []scope{where}})
}

// flush reports the findings to add, in the order they came.
func (o *oncePerFile) flush(add func(protoreflect.Descriptor, Finding)) {
	for _, ff := range o.found {
		switch {
		case len(ff.in) == 0:
			add(ff.d, ff.f)
		case len(ff.in) == 1:
			s := ff.in[0]
			if len(s.methods) < 2 {
				add(ff.d, ff.f)
				continue
			}
			f := ff.f
			f.Message = "in " + MethodList(s.methods, s.service.Methods().Len()) + ", " + f.Message
			add(s.service, f)
		default:
			f := ff.f
			f.Message = "in " + serviceList(ff.in, o.file.Services().Len()) + ", " + f.Message
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
