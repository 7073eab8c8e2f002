// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package templates

import (
	"io"
	"strings"
	"testing"
	"text/template"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNew(t *testing.T) {
	funcs := template.FuncMap{}
	for name := range Funcs {
		funcs[name] = func(...any) string { return "" }
	}
	tmpl, err := New(funcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Main, "policy", "client", "key", "params", "results", "server"} {
		if tmpl.Lookup(name) == nil {
			t.Errorf("template %q is not defined", name)
		}
	}
}

// TestNewWithoutFuncs checks that a template function the generator forgot
// fails loudly instead of rendering something plausible.
func TestNewWithoutFuncs(t *testing.T) {
	tmpl, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	key := map[string]string{"Getter": "GetId", "Func": "KeyFromInt", "Conv": ""}
	err = tmpl.ExecuteTemplate(io.Discard, "key", key)
	if err == nil || !strings.Contains(err.Error(), "not supplied") {
		t.Errorf("rendering without the generator's functions gave %v, want an error", err)
	}
}
