package priority

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a stress worker is left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
