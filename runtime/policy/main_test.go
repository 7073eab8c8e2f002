package policy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if any goroutine they started outlives them;
// the package starts none, and this keeps it so.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
