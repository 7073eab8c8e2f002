// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package override_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-resilient/resilient/override"
)

// TestFileWithNoValueIsNoOverrides: a 0-byte file was accepted while a
// file holding only comments (an operator's file with every line
// commented out) or only whitespace was refused as "must hold a mapping".
// Every file that holds no value is now no overrides, as no file is, and a
// variable beside it still applies; a file with one value besides its
// comments is still read, and still refused when that value is wrong.
func TestFileWithNoValueIsNoOverrides(t *testing.T) {
	commentedOut := "# overrides.yaml, off for now\n" +
		"# services:\n#   example.inventory.v1.InventoryService:\n#     methods:\n#       GetStock: {timeout: 150ms}\n"
	for name, file := range map[string]string{
		"0 bytes":                 "",
		"blank lines":             "\n\n   \n",
		"a tab on its own line":   "\t\n# c\n",
		"comments":                commentedOut,
		"indented comments":       "  # a\n\t# b\n",
		"CRLF":                    "# a\r\n\r\n# b\r\n",
		"byte-order mark":         "\ufeff# a\n",
		"no final newline":        "# a",
		"an empty document":       "---\n" + commentedOut,
		"an ended empty document": "---\n# a\n...\n",
		"null":                    "null\n",
	} {
		s, err := override.Parse("o.yaml", []byte(file), nil, inventory)
		if err != nil {
			t.Errorf("%s: %v, want no overrides", name, err)
			continue
		}
		if k := s.Keys(); len(k) != 0 {
			t.Errorf("%s: keys %q, want none", name, k)
		}
		if o := s.Options(inventory); o != nil {
			t.Errorf("%s: %d options, want none", name, len(o))
		}
	}

	// Loaded from disk, beside a variable: the variable applies.
	path := filepath.Join(t.TempDir(), "overrides.yaml")
	if err := os.WriteFile(path, []byte(commentedOut), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := override.Load(path, []string{"RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__STOCKREPORT__TIMEOUT=150ms"}, inventory)
	if err != nil {
		t.Fatal(err)
	}
	if p := build(t, s).Policy(); p.Methods[3].Timeout != 150*time.Millisecond {
		t.Errorf("StockReport timeout %v beside a commented-out file, want the variable's 150ms", p.Methods[3].Timeout)
	}

	// A value among comments is read, and refused when wrong.
	for name, tc := range map[string]struct{ file, want string }{
		"a bare word":         {"# a\nservices\n", "o.yaml: must hold a mapping"},
		"a list":              {"# a\n- services\n", "o.yaml: must hold a mapping"},
		"an unknown key":      {"# a\nservice: {}\n", "o.yaml: service: unknown key"},
		"a second document":   {"# a\n---\n# b\n---\n" + svcYAML("    timeout: 1s\n"), "holds more than one YAML document"},
		"a tab before a key":  {"\tservices: {}\n", "not valid YAML or JSON"},
		"a bad value in file": {"# a\n" + svcYAML("    timeout: fast\n"), "timeout"},
	} {
		if _, err := override.Parse("o.yaml", []byte(tc.file), nil, inventory); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}
