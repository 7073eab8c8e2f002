package runtime_test

import (
	"os"
	"testing"

	"google.golang.org/grpc"
)

// attack21aBroken skips a test that shows a break not yet mended, with
// t.Skip("BROKEN: " + what), unless ATTACK21A_BROKEN=1 is set: then the
// test runs, and fails while the break is there.
func attack21aBroken(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("ATTACK21A_BROKEN") != "1" {
		t.Skip("BROKEN: " + what)
	}
}

// waitForReady is the call option of a call or stream that waits for the
// connection to be ready instead of failing while gRPC reconnects.
func waitForReady() grpc.CallOption { return grpc.WaitForReady(true) }
