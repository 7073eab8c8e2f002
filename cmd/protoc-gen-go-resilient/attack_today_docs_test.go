// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"flag"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

// todayContract are the keys the override loader refuses as part of the
// contract (the page says so).
var todayContract = map[string]bool{"idempotent": true, "idempotency_key": true, "generate_idempotency_key": true, "priority": true}

// Every row of the policy page (docs=true) names a key the override
// loader knows, and shows the value in force: written back as an override
// of that key, the value is accepted (or refused as part of the
// contract, never as unknown) and changes nothing in the client built
// with it, or in the server policy the guard is built from.
func TestAttackTodayPolicyPageKeysOverrideNothing(t *testing.T) {
	req := testRequest(t, goldenInputs(t)...)
	req.Parameter = new(string)
	*req.Parameter = "module=" + testModule + ",docs=true"
	var flags flag.FlagSet
	o := newExportOptions(&flags)
	pgen, err := protogen.Options{ParamFunc: paramFunc(&flags)}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := generateWith(pgen, o); err != nil {
		t.Fatal(err)
	}
	resp := pgen.Response()
	if resp.Error != nil {
		t.Fatal(resp.GetError())
	}
	pages := map[string]string{} // by the proto's base name
	for _, f := range resp.File {
		if strings.HasSuffix(f.GetName(), ".policy.md") {
			base := strings.TrimSuffix(f.GetName()[strings.LastIndex(f.GetName(), "/")+1:], ".policy.md")
			pages[base] = f.GetContent()
		}
	}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`^## (\S+)$`)
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (.*) \\| (.*) \\|$")
	rows := 0
	for _, f := range gen.Files {
		if !f.Generate || len(f.Services) == 0 {
			continue
		}
		base := strings.TrimSuffix(f.Desc.Path()[strings.LastIndex(f.Desc.Path(), "/")+1:], ".proto")
		page, ok := pages[base]
		if !ok {
			t.Errorf("%s: no policy page", f.Desc.Path())
			continue
		}
		services := map[string]*service{}
		for i, sp := range resolveFile(f, &problems{}) {
			services[string(f.Services[i].Desc.FullName())] = sp
		}
		var cur *service
		for _, line := range strings.Split(page, "\n") {
			if m := heading.FindStringSubmatch(line); m != nil {
				cur = services[m[1]]
				if cur == nil {
					t.Errorf("%s: page heading %q names no service", base, m[1])
				}
				continue
			}
			m := row.FindStringSubmatch(line)
			if m == nil || cur == nil || m[1] == "key" {
				continue
			}
			rows++
			todayCheckRow(t, base, cur, m[1], m[2])
		}
	}
	if rows < 100 {
		t.Fatalf("only %d rows checked", rows)
	}
	t.Logf("%d rows checked", rows)
}

// todayCheckRow writes the row's value back under its key.
func todayCheckRow(t *testing.T, page string, sp *service, key, shown string) {
	t.Helper()
	parts := strings.Split(key, ".")
	leaf := parts[len(parts)-1]
	if i := strings.Index(shown, " (ignored: "); i > 0 {
		shown = shown[:i] // a breaker's window beside window_calls: shown, said to be ignored
	}
	var v any = shown
	if shown == "none" {
		// No value to write back; the key must still be known: a file that
		// names it with a value of no type is refused for its value, not as
		// unknown.
		v = []any{map[string]any{"not": "a value"}}
	}
	switch {
	case strings.HasPrefix(shown, "[") && strings.HasSuffix(shown, "]"):
		var list []any
		for _, s := range strings.Split(strings.Trim(shown, "[]"), ", ") {
			if s != "" {
				list = append(list, s)
			}
		}
		v = list
	case shown == "true" || shown == "false":
		v = shown == "true"
	default:
		if n, err := strconv.ParseFloat(shown, 64); err == nil {
			v = n
		}
	}
	tree := map[string]any{}
	node := tree
	for _, p := range parts[:len(parts)-1] {
		next := map[string]any{}
		node[p] = next
		node = next
	}
	node[leaf] = v
	data, err := json.Marshal(map[string]any{"services": map[string]any{sp.Policy.Name: tree}})
	if err != nil {
		t.Fatal(err)
	}
	p := sp.Policy.Clone()
	set, err := override.Parse("page.json", data, nil, &p)
	if shown == "none" {
		if err == nil || strings.Contains(err.Error(), "unknown") {
			t.Errorf("%s: %s (none on the page), given a bad value: %v, want its value refused", page, key, err)
		}
		return
	}
	if err != nil {
		if todayContract[leaf] && !strings.Contains(err.Error(), "unknown") {
			return // refused as part of the contract
		}
		t.Errorf("%s: %s = %s (as the page shows it): %v", page, key, shown, err)
		return
	}
	if todayContract[leaf] {
		t.Errorf("%s: %s = %s: accepted, though the page says the loader refuses it", page, key, shown)
	}
	if parts[0] == "shedding" || len(parts) > 2 && parts[2] == "server" {
		if sp.Server == nil {
			t.Errorf("%s: %s: a server key on a page whose service has no server policy", page, key)
			return
		}
		sv := sp.Server.Clone()
		for i := range sv.Methods {
			if sv.Methods[i].Dedup != nil {
				// What the generated literal sets (newResponses).
				sv.Methods[i].NewResponse = func() proto.Message { return new(emptypb.Empty) }
			}
		}
		opts, err := set.ServerOptions(&sv)
		if err != nil {
			t.Errorf("%s: %s = %s: ServerOptions: %v", page, key, shown, err)
			return
		}
		if _, err := server.NewGuard([]*policy.Server{&sv}, append(opts, server.WithStore(server.NewMemoryStore(16)))...); err != nil {
			t.Errorf("%s: %s = %s: NewGuard: %v", page, key, shown, err)
		}
		return
	}
	c, err := runtime.NewClient(&p, set.Options(&p)...)
	if err != nil {
		t.Errorf("%s: %s = %s: NewClient: %v", page, key, shown, err)
		return
	}
	if ch := c.Changes(); len(ch) != 0 {
		t.Errorf("%s: %s = %s, the value the page shows in force, changed the client: %+v", page, key, shown, ch)
	}
}
