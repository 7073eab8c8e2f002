// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/go-resilient/resilient/runtime/policy"
)

// literalStart begins the doc comment of a generated policy literal.
var literalStart = regexp.MustCompile(`^// \w+(ResilientPolicy|ServerPolicy) is `)

// TestPolicyLiteralsReadable holds the generated policy literals (client
// and server) of every golden file and of the example to what a reviewer
// reads: no line longer than 100 columns (a tab counted as 4), durations
// written with their unit (no bare count of nanoseconds).
func TestPolicyLiteralsReadable(t *testing.T) {
	files, _ := filepath.Glob("testdata/golden/*_resilient.pb.go.golden")
	example, _ := filepath.Glob("../../example/gen/example/*/v1/*_resilient.pb.go")
	files = append(files, example...)
	if len(files) < 10 {
		t.Fatalf("found %d generated files", len(files))
	}
	bareNanos := regexp.MustCompile(`(Timeout|Backoff|Window|CoolDown|Threshold|Wait|Delay|TTL|Lease|Deadline|Pushback):\s+[1-9]\d*,`)
	literals := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		in := false
		for i, line := range strings.Split(string(data), "\n") {
			if literalStart.MatchString(line) {
				in, literals = true, literals+1
			}
			if !in {
				continue
			}
			if w := len(strings.ReplaceAll(line, "\t", "    ")); w > 100 {
				t.Errorf("%s:%d: %d columns: %s", name, i+1, w, line)
			}
			if bareNanos.MatchString(line) {
				t.Errorf("%s:%d: a duration without its unit: %s", name, i+1, line)
			}
			if line == "}" {
				in = false
			}
		}
	}
	if literals < 20 {
		t.Errorf("checked %d literals, want every generated one", literals)
	}
}

// TestDurationExpr: the unit is the largest that divides the duration.
func TestDurationExpr(t *testing.T) {
	// durationExpr needs a GeneratedFile only to name package time.
	g := newTestFile(t)
	for d, want := range map[string]string{
		"0s": "0", "1ns": "time.Nanosecond", "1500ms": "1500 * time.Millisecond", "300ms": "300 * time.Millisecond",
		"24h": "24 * time.Hour", "90s": "90 * time.Second", "1m": "time.Minute", "2h30m": "150 * time.Minute",
		"1.000001s": "1000001 * time.Microsecond",
	} {
		if got := durationExpr(g, mustDuration(t, d)); got != want {
			t.Errorf("durationExpr(%s) = %s, want %s", d, got, want)
		}
	}
}

func newTestFile(t *testing.T) *protogen.GeneratedFile {
	t.Helper()
	plugin, err := protogen.Options{}.New(&pluginpb.CodeGeneratorRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return plugin.NewGeneratedFile("x.go", "x")
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLiteralWritesEveryField fills every field of every policy type the
// generated literals hold (policy.Service and policy.Server, and each type
// they reach) with a value that is not zero, prints it, and walks the
// parsed literal beside the type: each field must be written, each at its
// place, so that a field added to a policy type is generated, or this
// fails naming it.
func TestLiteralWritesEveryField(t *testing.T) {
	for _, root := range []any{new(policy.Service), new(policy.Server)} {
		v := reflect.ValueOf(root).Elem()
		code := map[string]string{}
		fillAll(t, v, "", code)
		g := newTestFile(t)
		out, err := literal(g, root, code)
		if err != nil {
			t.Fatalf("literal of a full %s: %v", v.Type(), err)
		}
		e, err := parser.ParseExpr(out)
		if err != nil {
			t.Fatalf("literal of a full %s does not parse: %v\n%s", v.Type(), err, out)
		}
		checkLiteral(t, e, v.Type(), v.Type().Name(), code)
	}
}

// fillAll sets every field of the struct v, at path, and of every struct
// it reaches, to a value that is not zero; a func it sets to one that does
// nothing, with the expression "nil" in code for literal to write.
func fillAll(t *testing.T, v reflect.Value, path string, code map[string]string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() { // no literal outside runtime/policy can set another
				fillAll(t, v.Field(i), path+"."+f.Name, code)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(t, v.Elem(), path, code)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fillAll(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), code)
		}
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { return nil }))
		code[strings.TrimPrefix(path, ".")] = "nil"
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1) // a time.Duration of 1ns
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1) // the second constant of each enum-like type; CodesOf(codes.OK)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.25)
	default:
		t.Fatalf("%s: a %s, which this test cannot fill; teach it, and literal, the new kind of field", path, v.Type())
	}
}

// checkLiteral checks that e is the literal of a full value of typ, at
// path: every field of each struct written, and only those.
func checkLiteral(t *testing.T, e ast.Expr, typ reflect.Type, path string, code map[string]string) {
	t.Helper()
	switch typ.Kind() {
	case reflect.Pointer:
		u, ok := e.(*ast.UnaryExpr)
		if !ok || u.Op != token.AND {
			t.Errorf("%s: %T, want &%s{…}", path, e, typ.Elem())
			return
		}
		checkLiteral(t, u.X, typ.Elem(), path, code)
	case reflect.Struct:
		lit, ok := e.(*ast.CompositeLit)
		if !ok {
			t.Errorf("%s: %T, want the literal of a %s", path, e, typ)
			return
		}
		keys := map[string]ast.Expr{}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				t.Errorf("%s: an element without its field name", path)
				continue
			}
			keys[kv.Key.(*ast.Ident).Name] = kv.Value
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			val, ok := keys[f.Name]
			if !ok {
				t.Errorf("%s.%s is not written", path, f.Name)
				continue
			}
			delete(keys, f.Name)
			checkLiteral(t, val, f.Type, path+"."+f.Name, code)
		}
		for k := range keys {
			t.Errorf("%s.%s: written, but %s has no such field", path, k, typ)
		}
	case reflect.Slice:
		lit, ok := e.(*ast.CompositeLit)
		if !ok || len(lit.Elts) != 2 {
			t.Errorf("%s: %T, want the literal of a %s of 2 elements", path, e, typ)
			return
		}
		for i, elt := range lit.Elts {
			checkLiteral(t, elt, typ.Elem(), fmt.Sprintf("%s[%d]", path, i), code)
		}
	case reflect.Func:
		if id, ok := e.(*ast.Ident); !ok || id.Name != "nil" {
			t.Errorf("%s: %T, want the code given for it", path, e)
		}
	default:
		// A scalar: a named one must not be a bare number (its constant,
		// a duration with its unit, a CodesOf call), nor quoted.
		if lit, ok := e.(*ast.BasicLit); ok && typ.PkgPath() != "" {
			t.Errorf("%s: a %s written as %s", path, typ, lit.Value)
		}
	}
}

// TestLiteralZeroFields: a zero field is left out, but for zeroWritten,
// whose zero is a decision: the literal of a method that sets nothing and
// of a bulkhead that refuses at once.
func TestLiteralZeroFields(t *testing.T) {
	p := policy.Service{
		Name:     "s",
		Bulkhead: &policy.Bulkhead{Permits: 4},
		Budget:   &policy.Budget{Ratio: 0.1, Window: 10 * time.Second},
		Methods:  []policy.Method{{Name: "/s/M"}, {Name: "/s/N", Kind: policy.KindBidiStreaming, Idempotent: true, Priority: policy.PriorityHigh}},
	}
	got, err := literal(newTestFile(t), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `policy.Service{
	Name: "s",
	Budget: &policy.Budget{
		Ratio: 0.1,
		MinRetries: 0,
		Window: 10 * time.Second,
	},
	Bulkhead: &policy.Bulkhead{
		Permits: 4,
		MaxWait: 0,
	},
	Methods: []policy.Method{
		{ // 0
			Name: "/s/M",
			Kind: policy.KindUnary,
			Idempotent: false,
		},
		{ // 1
			Name: "/s/N",
			Kind: policy.KindBidiStreaming,
			Idempotent: true,
			Priority: policy.PriorityHigh,
		},
	},
}`
	if got != want {
		t.Errorf("literal =\n%s\nwant\n%s", got, want)
	}
	// A struct held by value, on one line; a zero Code of a shedding (the
	// default) left out, and a dedup's zero OnStoreError written.
	s := policy.Server{
		Name:     "s",
		Shedding: &policy.Shedding{Limits: policy.Limits{Low: 1, Normal: 2, High: 3, Critical: 4}},
		Methods:  []policy.ServerMethod{{Name: "/s/M", Dedup: &policy.Dedup{TTL: time.Hour}}},
	}
	got, err = literal(newTestFile(t), &s, map[string]string{"Methods[0].NewResponse": "newM"})
	if err != nil {
		t.Fatal(err)
	}
	want = `policy.Server{
	Name: "s",
	Shedding: &policy.Shedding{
		Limits: policy.Limits{Low: 1, Normal: 2, High: 3, Critical: 4},
	},
	Methods: []policy.ServerMethod{
		{ // 0
			Name: "/s/M",
			Kind: policy.KindUnary,
			Dedup: &policy.Dedup{
				TTL: time.Hour,
				OnStoreError: policy.StoreErrorRefuse,
			},
			NewResponse: newM,
		},
	},
}`
	if got != want {
		t.Errorf("literal =\n%s\nwant\n%s", got, want)
	}
}

// TestLiteralRefuses: what the literal cannot write is an error naming
// where it is, never a bare number or a dropped func.
func TestLiteralRefuses(t *testing.T) {
	respond := func() proto.Message { return nil }
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"not a struct", 3, "want a runtime/policy struct"},
		{"nil", (*policy.Service)(nil), "want a runtime/policy struct"},
		{"unknown kind", policy.Service{Methods: []policy.Method{{Kind: 9}}}, "Methods[0].Kind: Kind(9) is no constant of policy.Kind"},
		{"unknown priority", policy.Server{Methods: []policy.ServerMethod{{Priority: 7}}}, "Methods[0].Priority: Priority(7) is no constant"},
		{"unknown store error mode", policy.Server{Methods: []policy.ServerMethod{{Dedup: &policy.Dedup{OnStoreError: 5}}}}, "Methods[0].Dedup.OnStoreError: StoreErrorMode(5) is no constant"},
		{"unknown code", policy.Server{Shedding: &policy.Shedding{Code: 40}}, "Shedding.Code: Code(40) is no constant"},
		{"func without code", policy.Server{Methods: []policy.ServerMethod{{NewResponse: respond}}}, "Methods[0].NewResponse: no Go expression"},
		{"not a policy type", struct{ Name string }{"x"}, "is no type of runtime/policy"},
	} {
		_, err := literal(newTestFile(t), c.v, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: literal gave %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// Code for a field the value does not have is a mistake of the
	// generator, not something to drop.
	for path, want := range map[string]string{
		"Methods[1].NewResponse": "policy.Server.Methods[1].NewResponse: code given for a field the literal does not hold",
		"Methods[0].NewRespons":  "policy.Server.Methods[0].NewRespons: code given",
	} {
		s := policy.Server{Name: "s", Methods: []policy.ServerMethod{{Name: "/s/M"}}}
		_, err := literal(newTestFile(t), s, map[string]string{path: "nil"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("code at %s: literal gave %v, want an error containing %q", path, err, want)
		}
	}
}
