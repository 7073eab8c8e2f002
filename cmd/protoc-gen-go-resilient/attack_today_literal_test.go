// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
)

// todayDump lists every value of a policy value, one "path=type(value)"
// a line, pointers followed, funcs as set or nil: two values with the
// same dump are reflect.DeepEqual but for the funcs' identity. The test
// below copies this function's source into the compiled module, so that
// the plugin's resolution and the compiled literal are dumped alike.
func todayDump(v reflect.Value, path string, out *[]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			*out = append(*out, path+"=nil")
			return
		}
		todayDump(v.Elem(), path, out)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				todayDump(v.Field(i), path+"."+v.Type().Field(i).Name, out)
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			*out = append(*out, path+"=nil slice")
			return
		}
		*out = append(*out, fmt.Sprintf("%s=len %d", path, v.Len()))
		for i := range v.Len() {
			todayDump(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Func:
		*out = append(*out, fmt.Sprintf("%s=func set %v", path, !v.IsNil()))
	case reflect.Map:
		*out = append(*out, fmt.Sprintf("%s=map %v", path, v.Interface()))
	default:
		*out = append(*out, fmt.Sprintf("%s=%s(%v)", path, v.Type(), v.Interface()))
	}
}

// The literal the plugin prints, compiled, is the value it resolved: for
// every test proto (every option of the contract among them), each
// XxxResilientPolicy and XxxServerPolicy var of the compiled output dumps
// exactly as the plugin's own resolution does; no field dropped, none
// changed.
func TestAttackTodayLiteralCompilesToResolution(t *testing.T) {
	goBin, repo := goAndRepo(t, "compiling")
	dir := t.TempDir()
	// The golden inputs, and one file of a service per extreme the plugin
	// accepts (attack_today_extremes_test.go).
	extremes := todayExtremesProto(t)
	edir := t.TempDir()
	writeFile(t, filepath.Join(edir, "extremes_all.proto"), []byte(extremes))
	req := compileRequest(t, "module="+testModule, []string{"testdata", edir, "../../options"},
		append(goldenInputs(t), "extremes_all.proto")...)

	// What the plugin resolved, by var name.
	want := map[string]string{}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gen.Files {
		if !f.Generate {
			continue
		}
		ps := &problems{}
		for i, sp := range resolveFile(f, ps) {
			name := f.Services[i].GoName
			want[name+"ResilientPolicy"] = todayDumpOf(&sp.Policy)
			if sp.Server != nil {
				// The template writes NewResponse, a func, for each method
				// with dedup (newResponses): the resolution holds none.
				w := todayDumpOf(sp.Server)
				for j, m := range sp.Server.Methods {
					if m.Dedup != nil {
						w = strings.Replace(w, fmt.Sprintf(".Methods[%d].NewResponse=func set false", j),
							fmt.Sprintf(".Methods[%d].NewResponse=func set true", j), 1)
					}
				}
				want[name+"ServerPolicy"] = w
			}
		}
	}

	// protoc-gen-go and protoc-gen-go-grpc, then the plugin's own output.
	writeGoAndGRPC(t, goBin, repo, dir, req)
	resp := runPlugin(t, req)
	writeResponse(t, dir, "protoc-gen-go-resilient", resp)

	// Beside each generated file, a test that prints its vars' dumps.
	varRE := regexp.MustCompile(`(?m)^var (\w+(?:ResilientPolicy|ServerPolicy)) = policy\.`)
	pkgRE := regexp.MustCompile(`(?m)^package (\w+)`)
	vars := map[string][]string{} // by directory
	pkgs := map[string]string{}
	for _, f := range resp.File {
		if !strings.HasSuffix(f.GetName(), ".go") {
			continue
		}
		d := filepath.Dir(filepath.FromSlash(f.GetName()))
		for _, m := range varRE.FindAllStringSubmatch(f.GetContent(), -1) {
			vars[d] = append(vars[d], m[1])
		}
		pkgs[d] = pkgRE.FindStringSubmatch(f.GetContent())[1]
	}
	dumpSrc := todayDumpSource(t)
	for d, vs := range vars {
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\nimport (\n\t\"fmt\"\n\t\"reflect\"\n\t\"strings\"\n\t\"testing\"\n)\n\n%s\n\n", pkgs[d], dumpSrc)
		b.WriteString("func TestDump(t *testing.T) {\n")
		for _, v := range vs {
			fmt.Fprintf(&b, "\t{\n\t\tvar out []string\n\t\ttodayDump(reflect.ValueOf(&%s), \"\", &out)\n", v)
			fmt.Fprintf(&b, "\t\tfmt.Printf(\"BEGIN %s\\n%%s\\nEND\\n\", strings.Join(out, \"\\n\"))\n\t}\n", v)
		}
		b.WriteString("}\n")
		writeFile(t, filepath.Join(dir, d, "zz_dump_test.go"), []byte(b.String()))
	}
	buildAndVet(t, goBin, dir, repo, testModule, "")
	if t.Failed() {
		return
	}
	run := exec.Command(goBin, "test", "-count=1", "-run", "^TestDump$", "-v", "./...")
	run.Dir = dir
	run.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	got, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the compiled module: %v\n%s", err, got)
	}
	blockRE := regexp.MustCompile(`(?s)BEGIN (\w+)\n(.*?)\nEND\n`)
	seen := map[string]string{}
	for _, m := range blockRE.FindAllStringSubmatch(string(got), -1) {
		seen[m[1]] = m[2]
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g, ok := seen[n]
		if !ok {
			t.Errorf("%s: resolved by the plugin, but no var of that name was compiled", n)
			continue
		}
		if g != want[n] {
			t.Errorf("%s: the compiled literal is not the resolution:\n%s", n, lineDiff(want[n], g))
		}
	}
	if len(seen) != len(want) {
		t.Errorf("compiled %d policy vars, the plugin resolved %d", len(seen), len(want))
	}
	t.Logf("%d policy vars compared", len(names))
}

// todayExtremesProto is one file holding a service for each extreme of
// todayExtremes the plugin accepts on its own.
func todayExtremesProto(t *testing.T) string {
	t.Helper()
	svc, meth, dedups := todayExtremes()
	type variant struct{ s, m, d string }
	var vs []variant
	for _, s := range svc {
		vs = append(vs, variant{s, "", todayTTL})
	}
	for _, m := range meth {
		vs = append(vs, variant{"", m, todayTTL})
	}
	for _, d := range dedups {
		vs = append(vs, variant{"", "", d})
	}
	head, body, _ := strings.Cut(todayExtremeProto, "service S {")
	head = strings.Replace(head, "package attack.extreme;", "package attack.extremes_all;", 1)
	head = strings.Replace(head, "resilienttest/attack/extreme", "resilienttest/attack/extremes_all", 1)
	var b strings.Builder
	b.WriteString(head)
	n := 0
	for _, v := range vs {
		if _, perr := attackProto(t, "extreme.proto", fmt.Sprintf(todayExtremeProto, v.s, v.m, v.d), ""); perr != "" {
			continue
		}
		fmt.Fprintf(&b, "service S%d {"+body, n, v.s, v.m, v.d)
		n++
	}
	if n < 20 {
		t.Fatalf("only %d extremes accepted", n)
	}
	return b.String()
}

func todayDumpOf(v any) string {
	var out []string
	todayDump(reflect.ValueOf(v), "", &out)
	return strings.Join(out, "\n")
}

// todayDumpSource is the source of todayDump, read from this file.
func todayDumpSource(t *testing.T) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "attack_today_literal_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "todayDump" {
			var b bytes.Buffer
			if err := printer.Fprint(&b, fset, fd); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
	}
	t.Fatal("no todayDump in attack_today_literal_test.go")
	return ""
}

// lineDiff lists the lines of want and got that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	inW := map[string]bool{}
	for _, l := range w {
		inW[l] = true
	}
	inG := map[string]bool{}
	for _, l := range g {
		inG[l] = true
	}
	for _, l := range w {
		if !inG[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !inW[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
