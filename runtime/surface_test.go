package runtime_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// exportedSurface counts what `go doc -all` lists of the package in dir:
// its exported functions, types, and the constructors and methods of its
// exported types.
func exportedSurface(t *testing.T, dir string) int {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pkgName string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		pkgName = f.Name.Name
		files[name] = f
	}
	// doc.New over an ast.Package: what go doc itself reads.
	p := doc.New(&ast.Package{Name: pkgName, Files: files}, dir, 0)
	n := len(p.Funcs)
	for _, ty := range p.Types {
		n += 1 + len(ty.Funcs) + len(ty.Methods)
	}
	return n
}

// TestREADMEStatesTheExportedSurface holds the README's counts of the
// exported surface of runtime and runtime/policy to the packages: a name
// added or removed without the README saying so fails here.
func TestREADMEStatesTheExportedSurface(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, intro string }{
		{"policy", "`runtime/policy` holds the policy values\nof both sides and their checks: "},
		{".", "pushback and the connection options, "},
	} {
		text := strings.Join(strings.Fields(string(readme)), " ")
		intro := strings.Join(strings.Fields(c.intro), " ") + " "
		m := regexp.MustCompile(regexp.QuoteMeta(intro) + `(\d+) exported functions, methods and types`).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("README: no count of %s's exported surface after %q", c.dir, c.intro)
			continue
		}
		if got := exportedSurface(t, c.dir); m[1] != strconv.Itoa(got) {
			t.Errorf("README says %s exports %s functions, methods and types; go doc -all lists %d: mend the README's development section", c.dir, m[1], got)
		}
	}
}
