// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlock is a fenced code block of README.md.
type readmeBlock struct {
	info    string // the info string: "proto proto/shop/inventory/v1/inventory.proto", "go"
	section string // the heading above it: "### 3. Construct and call"
	line    int    // 1-based line of the opening fence
	body    string
}

// lang is the first word of the info string.
func (b readmeBlock) lang() string {
	if f := strings.Fields(b.info); len(f) > 0 {
		return f[0]
	}
	return ""
}

// tag is what follows the language in the info string ("" for none): a
// path, or a name the tests look the block up by.
func (b readmeBlock) tag() string { return strings.TrimSpace(strings.TrimPrefix(b.info, b.lang())) }

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     []readmeBlock
		cur     *readmeBlock
		section string
	)
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		case strings.HasPrefix(line, "```"):
			cur = &readmeBlock{info: strings.TrimPrefix(line, "```"), section: section, line: i + 1}
		case strings.HasPrefix(line, "#"):
			section = line
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: the block never ends", cur.line)
	}
	return out
}

// readmeBlockTagged returns the one block with the info string info.
func readmeBlockTagged(t *testing.T, info string) readmeBlock {
	t.Helper()
	var found []readmeBlock
	for _, b := range readmeBlocks(t) {
		if b.info == info {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d blocks ```%s, want 1", len(found), info)
	}
	return found[0]
}

// TestREADMEProtos compiles every ```proto block of README.md, each a
// complete file tagged with its path, and runs the plugin on it: it must
// generate a client without a refusal.
func TestREADMEProtos(t *testing.T) {
	n := 0
	for _, b := range readmeBlocks(t) {
		if b.lang() != "proto" {
			continue
		}
		n++
		path := b.tag()
		if !strings.HasSuffix(path, ".proto") {
			t.Errorf("README.md:%d: a proto block is a complete file tagged with its path (```proto proto/x/v1/x.proto), got %q", b.line, b.info)
			continue
		}
		dir := t.TempDir()
		// A buf module rooted at the path's first directory (proto/).
		root, rel, _ := strings.Cut(path, "/")
		writeFile(t, filepath.Join(dir, root, filepath.FromSlash(rel)), []byte(b.body))
		req := compileRequest(t, "paths=source_relative", []string{filepath.Join(dir, root), "../../options"}, rel)
		resp := runPluginParams(t, req)
		if resp.Error != nil {
			t.Errorf("README.md:%d: the plugin refuses %s:\n%s", b.line, path, resp.GetError())
		} else if len(resp.File) != 1 {
			t.Errorf("README.md:%d: generated %d files, want the client", b.line, len(resp.File))
		}
	}
	if n == 0 {
		t.Fatal("README.md has no proto block")
	}
}

// goSnippet wraps a ```go block of README.md, a fragment, into a file that
// compiles: the imports it uses and a function whose parameters are what
// the fragment takes from its surroundings.
//
// A block quoting generated code is an excerpt instead: each piece of it
// (pieces are separated by a "// ..." line) must appear in the file
// excerptOf, line by line, indentation aside; that file is compiled by the
// tests that keep the example's generated code in sync.
type goSnippet struct{ imports, head, tail, excerptOf string }

// goSnippets are keyed by the heading above the block and its index under
// it; a Go block without one fails the test, so none escapes compiling.
var goSnippets = map[string]goSnippet{
	"### 3. Construct and call#0": {
		imports: `"context"; "log/slog"; "google.golang.org/grpc"; "google.golang.org/grpc/credentials"; "github.com/go-resilient/resilient/runtime"; inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"`,
		head:    `func snippet(addr string, creds credentials.TransportCredentials, lastKnownStock func(sku string) *inventoryv1.GetStockResponse) error {`,
		tail:    `_ = client; return nil }`,
	},
	"### 2. Generate#0": {excerptOf: "example/gen/example/inventory/v1/inventory_resilient.pb.go"},
	"## Server side#0": {
		imports: `"context"; "github.com/redis/go-redis/v9"; "google.golang.org/grpc"; "github.com/go-resilient/resilient/runtime"; "github.com/go-resilient/resilient/runtime/policy"; "github.com/go-resilient/resilient/runtime/server"; "github.com/go-resilient/resilient/runtime/server/redisstore"; inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"`,
		head:    `func snippet(rdb *redis.Client, tenantOf func(ctx context.Context) (string, error)) {`,
		tail:    `_, _ = err, s }`,
	},
	"## Overrides#0": {
		imports: `"log"; "log/slog"; "os"; "google.golang.org/grpc"; "github.com/go-resilient/resilient/override"; "github.com/go-resilient/resilient/runtime"; inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"; paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"`,
		head:    `func snippet(overridesFile *string, cc grpc.ClientConnInterface, logger *slog.Logger) {`,
		tail:    `_, _ = inventory, err }`,
	},
	"### Recommended dial options#0": {
		imports: `"google.golang.org/grpc"; "google.golang.org/grpc/credentials"; "github.com/go-resilient/resilient/runtime"`,
		head:    `func snippet(target string, creds credentials.TransportCredentials) {`,
		tail:    `_, _ = cc, err }`,
	},
}

// TestREADMEGoSnippets compiles and vets every ```go block of README.md,
// wrapped by goSnippets, each in a package of its own in a module that
// uses this repository (and its example's generated code).
func TestREADMEGoSnippets(t *testing.T) {
	goBin, repo := goAndRepo(t, "compiling the README's snippets")
	dir := t.TempDir()
	count := map[string]int{}
	used := map[string]bool{}
	for _, b := range readmeBlocks(t) {
		if b.lang() != "go" {
			continue
		}
		key := fmt.Sprintf("%s#%d", b.section, count[b.section])
		count[b.section]++
		w, ok := goSnippets[key]
		if !ok {
			t.Errorf("README.md:%d: a Go block with no wrapper in goSnippets (readme_test.go) under the key %q", b.line, key)
			continue
		}
		used[key] = true
		if w.excerptOf != "" {
			checkExcerpt(t, b, filepath.Join(repo, filepath.FromSlash(w.excerptOf)))
			continue
		}
		src := fmt.Sprintf("// README.md:%d\npackage snippet\n\nimport (%s)\n\n%s\n%s\n%s\n", b.line, w.imports, w.head, b.body, w.tail)
		writeFile(t, filepath.Join(dir, fmt.Sprintf("line%d", b.line), "snippet.go"), []byte(src))
	}
	for key := range goSnippets {
		if !used[key] {
			t.Errorf("goSnippets has %q, which matches no Go block of README.md any more: remove it", key)
		}
	}
	buildAndVet(t, goBin, dir, repo, "readmesnippets", " of the README's Go blocks (each file names its README.md line)")
}

// readmeMistakes are the mistakes of "```text mistakes", in its order: an
// edit of the README's complete example and a phrase its comment line must
// contain, so that the comment says what the edit does.
var readmeMistakes = []struct{ old, new, comment string }{
	{`retryable_codes: ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]`, `retryable_codes: [UNAVAILABLE, "RESOURCE_EXHAUSTED"]`, "retryable_codes: [UNAVAILABLE"},
	{`timeout: {nanos: 300000000} //`, `timeout: "300ms" //`, `timeout: "300ms"`},
	{`max_attempts: 3 //`, `max_attempt: 3 //`, "max_attempt: 3"},
}

// TestREADMEMistakes makes each mistake of readmeMistakes in the README's
// complete example and checks that buf (the version tools/go.mod pins) and
// protoc print what the README quotes. protoc is required under CI and
// skipped without it elsewhere.
func TestREADMEMistakes(t *testing.T) {
	if testing.Short() {
		t.Skip("building buf is slow; skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	example := readmeBlockTagged(t, "proto proto/shop/inventory/v1/inventory.proto")
	quoted := readmeBlockTagged(t, "text mistakes")
	groups := strings.Split(strings.TrimSpace(quoted.body), "\n\n")
	if len(groups) != len(readmeMistakes) {
		t.Fatalf("README.md:%d quotes %d mistakes, the test makes %d", quoted.line, len(groups), len(readmeMistakes))
	}
	cmd := exec.Command(goBin, "tool", "-modfile=tools/go.mod", "-n", "buf")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("building buf: %v", err)
	}
	buf := strings.TrimSpace(string(out))
	protoc, err := exec.LookPath("protoc")
	if err != nil && os.Getenv("CI") != "" {
		t.Fatal("protoc is not installed (apt-get install protobuf-compiler)")
	}
	options, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range readmeMistakes {
		lines := strings.Split(groups[i], "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "# ") || !strings.Contains(lines[0], m.comment) {
			t.Errorf("README.md:%d: mistake %d is not a comment naming %q, then buf's line and protoc's: %q", quoted.line, i+1, m.comment, groups[i])
			continue
		}
		if strings.Count(example.body, m.old) != 1 {
			t.Fatalf("the README's example has no single %q any more: update readmeMistakes", m.old)
		}
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "buf.yaml"), []byte("version: v2\nmodules:\n  - path: proto\n  - path: third_party\n"))
		writeFile(t, filepath.Join(dir, "third_party", "resilient", "v1", "resilient.proto"), options)
		writeFile(t, filepath.Join(dir, "proto", "shop", "inventory", "v1", "inventory.proto"), []byte(strings.Replace(example.body, m.old, m.new, 1)))
		run := func(name string, args ...string) string {
			cmd := exec.Command(name, args...)
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err == nil {
				t.Errorf("%s accepted %s", filepath.Base(name), m.new)
			}
			return strings.TrimSpace(out.String())
		}
		if got := run(buf, "build"); got != lines[1] {
			t.Errorf("README.md:%d: with %s, buf prints\n%s\nthe README says\n%s", quoted.line, m.new, got, lines[1])
		}
		if protoc == "" {
			continue
		}
		if got := run(protoc, "-Iproto", "-Ithird_party", "-o", os.DevNull, "proto/shop/inventory/v1/inventory.proto"); got != lines[2] {
			t.Errorf("README.md:%d: with %s, protoc prints\n%s\nthe README says\n%s", quoted.line, m.new, got, lines[2])
		}
	}
}

// checkExcerpt checks that every piece of the block b appears in file.
func checkExcerpt(t *testing.T, b readmeBlock, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	trim := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimSpace(l)
		}
		return strings.Join(lines, "\n")
	}
	text := trim(string(raw))
	for _, piece := range strings.Split(b.body, "\n// ...\n") {
		if !strings.Contains(text, trim(piece)) {
			t.Errorf("README.md:%d quotes, from %s, what it does not hold:\n%s", b.line, file, piece)
		}
	}
}

// TestREADMEPolicyPageExcerpt: the excerpt of a policy page in the README
// (```md tagged with the page's path) is in the page, line by line and in
// order: a line "…" skips lines, a line ending in " …" is the start of
// one.
func TestREADMEPolicyPageExcerpt(t *testing.T) {
	n := 0
	for _, b := range readmeBlocks(t) {
		if b.lang() != "md" || !strings.HasSuffix(b.tag(), ".policy.md") {
			continue
		}
		n++
		page, err := os.ReadFile(filepath.Join("../..", filepath.FromSlash(b.tag())))
		if err != nil {
			t.Fatalf("README.md:%d: %v", b.line, err)
		}
		lines := strings.Split(string(page), "\n")
		at := 0
		for _, want := range strings.Split(strings.TrimSuffix(b.body, "\n"), "\n") {
			if want == "…" {
				continue
			}
			prefix, cut := strings.CutSuffix(want, " …")
			found := false
			for ; at < len(lines) && !found; at++ {
				found = lines[at] == want || (cut && strings.HasPrefix(lines[at], prefix))
			}
			if !found {
				t.Errorf("README.md:%d: %s has no line %q (after the lines before it)", b.line, b.tag(), want)
				break
			}
		}
	}
	if n == 0 {
		t.Fatal("README.md has no excerpt of a policy page")
	}
}
