package throttle

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine it started is left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
