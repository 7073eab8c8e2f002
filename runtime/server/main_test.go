package server

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is still
// running at the end: a lease renewer, a waiter, a server left behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
