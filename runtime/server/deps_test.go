package server

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestNoRedisDependency: runtime/server does not link go-redis; the Redis
// store is the redisstore package's, imported only by a program that uses
// it.
func TestNoRedisDependency(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "redis") {
			t.Errorf("runtime/server depends on %s", dep)
		}
	}
}
