package example_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// readyConn connects cc and waits, up to 10 s, until it is ready: a test
// that times a call starts it on a connection made, so that a loaded
// machine's slow dial does not use up the call's time before the request
// is sent.
func readyConn(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("the connection to %s is %v after 10s", cc.Target(), s)
		}
	}
}

// bareWait starts, beside a call under test, a goroutine that waits for a
// deadline d from now with nothing else to do; late returns how late past
// it that goroutine woke. It is the baseline of a timing bound: what the
// scheduler alone adds, at that moment, on a machine that may be loaded.
func bareWait(d time.Duration) (late func() time.Duration) {
	ch := make(chan time.Duration, 1)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		defer cancel()
		dl, _ := ctx.Deadline()
		<-ctx.Done()
		ch <- max(time.Since(dl), 0)
	}()
	return func() time.Duration { return <-ch }
}
