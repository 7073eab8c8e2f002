package adaptive

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine it started is left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// broken skips a test that shows a break not yet mended, with
// t.Skip("BROKEN: " + what), unless ATTACK21A_BROKEN=1 is set: then the
// test runs (and prints its figures), as runtime's attack21aBroken.
func broken(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("ATTACK21A_BROKEN") != "1" {
		t.Skip("BROKEN: " + what)
	}
}
