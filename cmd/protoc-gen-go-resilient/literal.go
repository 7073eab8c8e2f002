// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/compiler/protogen"

	"github.com/go-resilient/resilient/runtime/policy"
)

var timePackage = protogen.GoImportPath("time")

// durationUnits are the units a duration is written in, the largest
// first, with the name of their constant in package time.
var durationUnits = []struct {
	d    time.Duration
	name string
}{
	{time.Hour, "Hour"},
	{time.Minute, "Minute"},
	{time.Second, "Second"},
	{time.Millisecond, "Millisecond"},
	{time.Microsecond, "Microsecond"},
	{time.Nanosecond, "Nanosecond"},
}

// durationExpr writes d as a Go expression a reader takes in at a glance:
// the largest unit that divides it, "300 * time.Millisecond",
// "24 * time.Hour", "time.Second"; "0" for none.
func durationExpr(g *protogen.GeneratedFile, d time.Duration) string {
	if d == 0 {
		return "0"
	}
	for _, u := range durationUnits {
		if d%u.d != 0 {
			continue
		}
		unit := g.QualifiedGoIdent(timePackage.Ident(u.name))
		if n := d / u.d; n != 1 {
			return strconv.FormatInt(int64(n), 10) + " * " + unit
		}
		return unit
	}
	panic("unreachable: every duration is a whole number of nanoseconds")
}

// codesExpr writes a set of status codes as the policy.CodesOf call that
// makes it, in the order of their numbers: on one line for one or two
// codes, one code a line for more, so that no line of the literal grows
// past 100 columns.
func codesExpr(g *protogen.GeneratedFile, cs policy.CodeSet) string {
	var args []string
	for _, c := range cs.Codes() {
		// The constants of package codes are named as Code.String spells
		// them: codes.Unavailable, codes.DeadlineExceeded.
		args = append(args, g.QualifiedGoIdent(codesPackage.Ident(c.String())))
	}
	call := g.QualifiedGoIdent(policyPackage.Ident("CodesOf"))
	if len(args) <= 2 {
		return call + "(" + strings.Join(args, ", ") + ")"
	}
	return call + "(\n" + strings.Join(args, ",\n") + ",\n)"
}

// zeroWritten names the fields a literal writes even at their zero,
// because there the zero is a decision a reader must see rather than the
// absence of a setting: a method that is not idempotent, a unary one, a
// bulkhead or rate limit that refuses at once, a budget with no floor of
// retries, a dedup that refuses when its store fails. Any other zero field
// (no timeout, no retry of its own, a default of the runtime) is left out.
var zeroWritten = map[string]bool{
	"Idempotent":   true,
	"Kind":         true,
	"MaxWait":      true,
	"MinRetries":   true,
	"OnStoreError": true,
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	codeSetType  = reflect.TypeFor[policy.CodeSet]()
)

// literal writes v, a runtime/policy struct or a pointer to one, as the Go
// composite literal of the struct, by reflection over its type, so that a
// field added to a policy type is generated without a change here:
//
//   - a group (a pointer to a struct) as &policy.Breaker{…}, and each
//     element of a slice of structs (Methods) with its index as a comment,
//     one field a line; a struct held by value (policy.Limits) on one line;
//   - durations with their unit (durationExpr), code sets as the
//     policy.CodesOf call (codesExpr), the enum-like types by the name of
//     their constant (constNames), floats shortest, strings quoted;
//   - a zero field is left out, but for zeroWritten.
//
// code holds the Go expressions of the fields a value cannot hold as data
// (a func), by their path ("Methods[0].NewResponse"), written in place of
// the value whatever it is. Every identifier goes through g, which owns the
// imports. A type the literal cannot write (an enum-like type without
// constNames, a map, a func without code) is an error naming its path.
func literal(g *protogen.GeneratedFile, v any, code map[string]string) (string, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return "", fmt.Errorf("protoc-gen-go-resilient: a literal of %T %v: want a runtime/policy struct or a pointer to one", v, v)
	}
	w := &literalWriter{g: g, code: code, root: rv.Type(), used: map[string]bool{}}
	name, err := w.typeName(rv.Type(), "")
	if err != nil {
		return "", err
	}
	if err := w.block(rv, "", 0, name+"{"); err != nil {
		return "", err
	}
	for path := range code {
		if !w.used[path] {
			return "", w.errorf(path, "code given for a field the literal does not hold")
		}
	}
	return w.b.String(), nil
}

// literalWriter is one literal being written.
type literalWriter struct {
	g    *protogen.GeneratedFile
	code map[string]string
	root reflect.Type    // of the literal, which errors name
	used map[string]bool // the paths of code written
	b    strings.Builder
}

// errorf is an error at path of the literal.
func (w *literalWriter) errorf(path, format string, args ...any) error {
	where := w.root.String()
	if path != "" {
		where += "." + path
	}
	return fmt.Errorf("protoc-gen-go-resilient: the literal of %s: %s", where, fmt.Sprintf(format, args...))
}

// A litField is one field of a struct the literal writes.
type litField struct {
	name, path string
	v          reflect.Value
}

// fields lists the fields of the struct v, at path, that its literal
// writes, in the order of the type: the exported ones (no literal outside
// runtime/policy can set another) that are not zero, the zeroWritten ones,
// and those code holds an expression for.
func (w *literalWriter) fields(v reflect.Value, path string) []litField {
	var out []litField
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		p := f.Name
		if path != "" {
			p = path + "." + f.Name
		}
		if _, ok := w.code[p]; !ok && v.Field(i).IsZero() && !zeroWritten[f.Name] {
			continue
		}
		out = append(out, litField{f.Name, p, v.Field(i)})
	}
	return out
}

// block writes the struct v, at path, depth braces in, after head (its
// type and brace, or a slice element's brace and index): one field a
// line, then the closing brace.
func (w *literalWriter) block(v reflect.Value, path string, depth int, head string) error {
	w.b.WriteString(head)
	w.b.WriteString("\n")
	for _, f := range w.fields(v, path) {
		w.indent(depth + 1)
		w.b.WriteString(f.name + ": ")
		if err := w.value(f.v, f.path, depth+1); err != nil {
			return err
		}
		w.b.WriteString(",\n")
	}
	w.indent(depth)
	w.b.WriteString("}")
	return nil
}

func (w *literalWriter) indent(depth int) {
	w.b.WriteString(strings.Repeat("\t", depth))
}

// value writes v, found at path, depth braces in.
func (w *literalWriter) value(v reflect.Value, path string, depth int) error {
	if c, ok := w.code[path]; ok {
		w.used[path] = true
		w.b.WriteString(c)
		return nil
	}
	t := v.Type()
	switch t {
	case durationType:
		w.b.WriteString(durationExpr(w.g, time.Duration(v.Int())))
		return nil
	case codeSetType:
		w.b.WriteString(codesExpr(w.g, policy.CodeSet(v.Uint())))
		return nil
	}
	if name, ok := constNames[t]; ok {
		c, ok := name(v)
		if !ok {
			return w.errorf(path, "%v is no constant of %s", v, t)
		}
		w.b.WriteString(w.g.QualifiedGoIdent(c))
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if t.Elem().Kind() != reflect.Struct {
			break
		}
		name, err := w.typeName(t.Elem(), path)
		if err != nil {
			return err
		}
		return w.block(v.Elem(), path, depth, "&"+name+"{")
	case reflect.Struct:
		return w.line(v, path)
	case reflect.Slice:
		return w.slice(v, path, depth)
	}
	if t.PkgPath() != "" {
		// A named type of its own (an enum-like one) would be written
		// as a bare number.
		return w.errorf(path, "no Go expression for a %s: name its constants in constNames (literal.go)", t)
	}
	switch t.Kind() {
	case reflect.String:
		w.b.WriteString(strconv.Quote(v.String()))
	case reflect.Bool:
		w.b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		w.b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	default:
		return w.errorf(path, "no Go expression for a %s", t)
	}
	return nil
}

// line writes the struct v, at path, on one line.
func (w *literalWriter) line(v reflect.Value, path string) error {
	name, err := w.typeName(v.Type(), path)
	if err != nil {
		return err
	}
	w.b.WriteString(name + "{")
	for i, f := range w.fields(v, path) {
		if i > 0 {
			w.b.WriteString(", ")
		}
		w.b.WriteString(f.name + ": ")
		if err := w.value(f.v, f.path, 0); err != nil {
			return err
		}
	}
	w.b.WriteString("}")
	return nil
}

// slice writes the slice v, at path, depth braces in: of structs one
// element a block with its index, of anything else on one line.
func (w *literalWriter) slice(v reflect.Value, path string, depth int) error {
	et := v.Type().Elem()
	if et.Kind() == reflect.Struct {
		name, err := w.typeName(et, path)
		if err != nil {
			return err
		}
		w.b.WriteString("[]" + name + "{\n")
		for i := range v.Len() {
			w.indent(depth + 1)
			if err := w.block(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1, fmt.Sprintf("{ // %d", i)); err != nil {
				return err
			}
			w.b.WriteString(",\n")
		}
		w.indent(depth)
		w.b.WriteString("}")
		return nil
	}
	if et.PkgPath() != "" || et.Kind() == reflect.Pointer || et.Kind() == reflect.Slice {
		return w.errorf(path, "no Go expression for a %s", v.Type())
	}
	w.b.WriteString("[]" + et.String() + "{")
	for i := range v.Len() {
		if i > 0 {
			w.b.WriteString(", ")
		}
		if err := w.value(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth); err != nil {
			return err
		}
	}
	w.b.WriteString("}")
	return nil
}

// typeName is the name of the struct type t, found at path, as the
// generated file spells it: a type of runtime/policy, by its name.
func (w *literalWriter) typeName(t reflect.Type, path string) (string, error) {
	if t.PkgPath() != string(policyPackage) {
		return "", w.errorf(path, "%s is no type of runtime/policy: the literal prints policy values only", t)
	}
	return w.g.QualifiedGoIdent(policyPackage.Ident(t.Name())), nil
}

// constNames name the constant of a value of each enum-like type of the
// policies, false for a value that has none.
var constNames = map[reflect.Type]func(reflect.Value) (protogen.GoIdent, bool){
	reflect.TypeFor[policy.Kind]():           constOf(kindConst),
	reflect.TypeFor[policy.Priority]():       constOf(priorityConst),
	reflect.TypeFor[policy.StoreErrorMode](): constOf(storeErrorConst),
	reflect.TypeFor[codes.Code](): func(v reflect.Value) (protogen.GoIdent, bool) {
		// The constants of package codes are named as Code.String spells
		// them: codes.Unavailable, codes.DeadlineExceeded.
		c := codes.Code(v.Uint())
		return codesPackage.Ident(c.String()), c <= codes.Unauthenticated
	},
}

// constOf names the runtime/policy constants of a type after names.
func constOf[T comparable](names map[T]string) func(reflect.Value) (protogen.GoIdent, bool) {
	return func(v reflect.Value) (protogen.GoIdent, bool) {
		name, ok := names[v.Interface().(T)]
		return policyPackage.Ident(name), ok
	}
}

// kindConst, priorityConst and storeErrorConst name the runtime/policy
// constant of a value.
var (
	kindConst = map[policy.Kind]string{
		policy.KindUnary:           "KindUnary",
		policy.KindClientStreaming: "KindClientStreaming",
		policy.KindServerStreaming: "KindServerStreaming",
		policy.KindBidiStreaming:   "KindBidiStreaming",
	}
	priorityConst = map[policy.Priority]string{
		policy.PriorityUnspecified: "PriorityUnspecified",
		policy.PriorityLow:         "PriorityLow",
		policy.PriorityNormal:      "PriorityNormal",
		policy.PriorityHigh:        "PriorityHigh",
		policy.PriorityCritical:    "PriorityCritical",
	}
	storeErrorConst = map[policy.StoreErrorMode]string{
		policy.StoreErrorRefuse:          "StoreErrorRefuse",
		policy.StoreErrorRunWithoutDedup: "StoreErrorRunWithoutDedup",
	}
)
