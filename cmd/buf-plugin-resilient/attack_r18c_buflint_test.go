// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// r18cBufLint runs the real buf lint (the version pinned in tools/go.mod)
// with this lint plugin, built from source and found on PATH as the
// README's buf.yaml names it, over a copy of testdata/attack_r18c laid out
// as README "Use it in your own repository" lays out a user's repository:
// a module proto/ and a module third_party/ with a vendored copy of
// resilient.proto. It returns the findings as "path:line RULE_ID".
func r18cBufLint(t *testing.T, bufYAML string) []string {
	t.Helper()
	bin, repo := bufAndPlugin(t)

	ws := t.TempDir()
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"shop.proto", "ignored.proto"} {
		copyFile(filepath.Join("testdata", "attack_r18c", "proto", "shop", "v1", f), filepath.Join(ws, "proto", "shop", "v1", f))
	}
	copyFile(filepath.Join(repo, "options", "resilient", "v1", "resilient.proto"), filepath.Join(ws, "third_party", "resilient", "v1", "resilient.proto"))
	if err := os.WriteFile(filepath.Join(ws, "buf.yaml"), []byte(bufYAML), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(filepath.Join(bin, "buf"), "lint", "--error-format=json")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BUF_CACHE_DIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("buf lint found nothing; stderr:\n%s", stderr.String())
	}
	var found []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a struct {
			Path      string `json:"path"`
			StartLine int    `json:"start_line"`
			Type      string `json:"type"`
			Plugin    string `json:"plugin"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("buf lint printed %q: %v; stderr:\n%s", sc.Text(), err, stderr.String())
		}
		if a.Plugin != "buf-plugin-resilient" {
			t.Errorf("a finding of plugin %q: %s", a.Plugin, sc.Text())
		}
		found = append(found, a.Path+":"+itoa(a.StartLine)+" "+a.Type)
	}
	slices.Sort(found)
	return found
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestAttackR18cBufLint: real buf lint on a user's layout. Each finding
// is at the file and line of its method (README "Lint in buf": at the
// file, service or method), under a rule the README's table documents;
// buf's own configuration works on the plugin's rules as buf documents
// it: except drops a rule everywhere (RESILIENT_NO_TIMEOUT, which the
// RESILIENT category turns on), ignore_only drops one in a file
// (RESILIENT_CACHE in ignored.proto), a "buf:lint:ignore" comment drops
// one at its element (RESILIENT_KEY_FIELD on shop.proto's Watch, not on
// ignored.proto's). The default_value the user wrote on Req.sku is
// neither a finding nor an error. The vendored copy of resilient.proto
// itself gets no finding.
func TestAttackR18cBufLint(t *testing.T) {
	const base = "version: v2\nmodules:\n  - path: proto\n  - path: third_party\nplugins:\n  - plugin: buf-plugin-resilient\nlint:\n  use: [RESILIENT]\n"
	got := r18cBufLint(t, base+"  except: [RESILIENT_NO_TIMEOUT]\n  ignore_only:\n    RESILIENT_CACHE:\n      - proto/shop/v1/ignored.proto\n")
	want := []string{
		"proto/shop/v1/ignored.proto:10 RESILIENT_RETRY_NOT_IDEMPOTENT",
		"proto/shop/v1/ignored.proto:13 RESILIENT_KEY_FIELD",
		"proto/shop/v1/shop.proto:12 RESILIENT_RETRY_NOT_IDEMPOTENT",
		"proto/shop/v1/shop.proto:16 RESILIENT_CACHE",
	}
	if !slices.Equal(got, want) {
		t.Errorf("buf lint found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without except and ignore_only: the two are back, and every rule
	// id found is a row of the README's table.
	got = r18cBufLint(t, base)
	want = []string{
		"proto/shop/v1/ignored.proto:10 RESILIENT_RETRY_NOT_IDEMPOTENT",
		"proto/shop/v1/ignored.proto:13 RESILIENT_CACHE",
		"proto/shop/v1/ignored.proto:13 RESILIENT_KEY_FIELD",
		"proto/shop/v1/shop.proto:12 RESILIENT_RETRY_NOT_IDEMPOTENT",
		"proto/shop/v1/shop.proto:16 RESILIENT_CACHE",
		"proto/shop/v1/shop.proto:39 RESILIENT_NO_TIMEOUT",
	}
	if !slices.Equal(got, want) {
		t.Errorf("buf lint found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		id := f[strings.LastIndex(f, " ")+1:]
		if !strings.Contains(string(readme), "| `"+id+"` |") {
			t.Errorf("rule %s has no row in the README's table of rules", id)
		}
	}
}
