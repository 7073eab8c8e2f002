// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"strings"

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

// flush reports the findings to add, in the order they came.
func (o *oncePerService) flush(add func(protoreflect.Descriptor, Finding)) {
	for _, of := range o.found {
		if len(of.methods) < 2 {
			add(of.d, of.f)
			continue
		}
		f := of.f
		f.Message = "in " + methodList(of.methods, o.service.Methods().Len()) + ", " + f.Message
		add(o.service, f)
	}
}

// methodList names several methods of a service of n: "Get and List",
// "Get, List and Put", "each method".
func methodList(names []string, n int) string {
	if len(names) == n {
		return "each method"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
