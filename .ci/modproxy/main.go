// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// modproxy writes the modules of this checkout (the files git tracks) as a
// file-based Go module proxy at one version, so that .ci/run can check that
// "go install …@version" works as it will once the modules are published:
// a go.mod replace directive, for one, would make it fail.
//
//	go run ./.ci/modproxy DIR VERSION
//
// then GOPROXY=file://DIR,$GOPROXY GONOSUMDB=github.com/go-resilient.
package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: go run ./.ci/modproxy DIR VERSION")
	}
	dir, version := os.Args[1], os.Args[2]
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		log.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	// Every directory with a go.mod is a module; a file belongs to the
	// innermost one.
	var roots []string
	for _, f := range files {
		if path.Base(f) == "go.mod" {
			roots = append(roots, path.Dir(f))
		}
	}
	sort.Slice(roots, func(i, j int) bool { return len(roots[i]) > len(roots[j]) })
	owned := map[string][]string{}
	for _, f := range files {
		for _, r := range roots {
			if r == "." || strings.HasPrefix(f, r+"/") {
				owned[r] = append(owned[r], f)
				break
			}
		}
	}
	for _, r := range roots {
		if err := write(dir, version, r, owned[r]); err != nil {
			log.Fatal(err)
		}
	}
}

// write adds the module rooted at root, made of files, to the proxy at dir.
func write(dir, version, root string, files []string) error {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	var mod string
	for sc := bufio.NewScanner(bytes.NewReader(gomod)); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			mod = f[1]
		}
	}
	if mod == "" {
		return fmt.Errorf("%s/go.mod names no module", root)
	}
	at := filepath.Join(dir, filepath.FromSlash(mod), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, content := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), content, 0o644); err != nil {
			return err
		}
	}
	zf, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	defer zf.Close()
	z := zip.NewWriter(zf)
	for _, f := range files {
		rel := strings.TrimPrefix(f, root+"/")
		if root == "." {
			rel = f
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		w, err := z.Create(mod + "@" + version + "/" + rel)
		if err != nil {
			return err
		}
		if _, err := w.Write(src); err != nil {
			return err
		}
	}
	return z.Close()
}
