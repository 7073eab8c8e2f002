package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readmeBlock returns the body of the one fenced block of README.md whose
// info string is info and whose body begins with first.
func readmeBlock(t *testing.T, info, first string) string {
	t.Helper()
	raw, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	blocks := strings.Split(string(raw), "\n```")
	// Odd pieces are the blocks: their info string, a newline, the body.
	for i := 1; i < len(blocks); i += 2 {
		head, body, _ := strings.Cut(blocks[i], "\n")
		if head == info && strings.HasPrefix(body, first) {
			found = append(found, body+"\n")
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d blocks ```%s beginning %q, want 1", len(found), info, first)
	}
	return found[0]
}

// TestREADMEPrintPolicy: the README's Overrides section shows the output
// of `go run ./example/cmd/client -overrides overrides.yaml -print-policy`
// for its overrides.yaml; it is this program's output, line for line.
func TestREADMEPrintPolicy(t *testing.T) {
	yaml := readmeBlock(t, "yaml", "# overrides.yaml\n")
	want := readmeBlock(t, "text", "$ go run ./example/cmd/client -overrides overrides.yaml -print-policy\n")
	t.Chdir(t.TempDir())
	if err := os.WriteFile(filepath.Join(".", "overrides.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	got.WriteString("$ go run ./example/cmd/client -overrides overrides.yaml -print-policy\n")
	if err := run(&got, "127.0.0.1:1", 0, true, "overrides.yaml", ""); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("README.md shows:\n%s\nthe program prints:\n%s", want, got.String())
	}
}
