package bench

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
)

// closedWithin fails t unless ch is closed within d.
func closedWithin(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
		return
	default:
	}
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not done after %v", what, d)
	}
}

// openFor fails t if ch is closed within d.
func openFor(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: done, should not be", what)
	case <-time.After(d):
	}
}

type ctxKey struct{}

func TestAttemptCtxTimerFires(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	now := time.Now()
	c := newAttemptCtx(parent, now, 30*time.Millisecond)
	defer c.release()
	if dl, ok := c.Deadline(); !ok || !dl.Equal(now.Add(30*time.Millisecond)) {
		t.Fatalf("Deadline() = %v, %v; want %v, true", dl, ok, now.Add(30*time.Millisecond))
	}
	if c.Err() != nil || context.Cause(c) != nil {
		t.Fatalf("live context: Err %v, Cause %v", c.Err(), context.Cause(c))
	}
	if got := c.Value(ctxKey{}); got != "v" {
		t.Fatalf("Value = %v, want the parent's", got)
	}
	closedWithin(t, c.Done(), 2*time.Second, "attempt")
	if took := time.Since(now); took < 30*time.Millisecond {
		t.Fatalf("done after %v, before its deadline", took)
	}
	if c.Err() != context.DeadlineExceeded { // identity: grpc-go compares with ==
		t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
	}
	if got := context.Cause(c); got != context.DeadlineExceeded {
		t.Fatalf("Cause = %v, want DeadlineExceeded", got)
	}
	c.release() // after the timer: changes nothing
	if c.Err() != context.DeadlineExceeded {
		t.Fatalf("release after expiry changed Err to %v", c.Err())
	}
}

func TestAttemptCtxReleaseStopsTimer(t *testing.T) {
	c := newAttemptCtx(context.Background(), time.Now(), 20*time.Millisecond)
	done := c.Done()
	c.release()
	closedWithin(t, done, time.Second, "released attempt")
	if c.Err() != context.Canceled || context.Cause(c) != context.Canceled {
		t.Fatalf("Err %v, Cause %v; want Canceled", c.Err(), context.Cause(c))
	}
	if c.timer.Stop() { // true would mean release left the timer pending
		t.Fatal("release left the timer running")
	}
	time.Sleep(40 * time.Millisecond) // past the deadline: the timer must not have ended it again
	if c.Err() != context.Canceled {
		t.Fatalf("Err became %v after the deadline", c.Err())
	}
	// Done made after the end is the closed channel.
	c2 := newAttemptCtx(context.Background(), time.Now(), time.Second)
	c2.release()
	closedWithin(t, c2.Done(), 0, "Done made after release")
}

func TestAttemptCtxParentCancelPropagates(t *testing.T) {
	cause := errors.New("caller gave up")
	parent, cancel := context.WithCancelCause(context.Background())
	c := newAttemptCtx(parent, time.Now(), time.Minute)
	defer c.release()
	child, ccancel := context.WithCancel(c)
	defer ccancel()
	openFor(t, c.Done(), 10*time.Millisecond, "attempt before the parent's cancel")
	cancel(cause)
	closedWithin(t, c.Done(), time.Second, "attempt")
	closedWithin(t, child.Done(), time.Second, "grpc-like child")
	if c.Err() != context.Canceled || child.Err() != context.Canceled {
		t.Fatalf("Err: attempt %v, child %v; want Canceled", c.Err(), child.Err())
	}
	if context.Cause(c) != cause || context.Cause(child) != cause {
		t.Fatalf("Cause: attempt %v, child %v; want the parent's %v", context.Cause(c), context.Cause(child), cause)
	}
	c.mu.Lock()
	tm := c.timer
	c.mu.Unlock()
	if tm.Stop() {
		t.Fatal("the parent's cancel left the timer running")
	}
}

func TestAttemptCtxParentDeadlinePropagates(t *testing.T) {
	// A parent whose own deadline passes ends the attempt with
	// DeadlineExceeded (the runtime would not make one here, the parent's
	// deadline being shorter; a custom parent might be).
	parent, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	c := newAttemptCtx(parent, time.Now(), time.Minute)
	defer c.release()
	closedWithin(t, c.Done(), time.Second, "attempt")
	if c.Err() != context.DeadlineExceeded {
		t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
	}
}

func TestAttemptCtxParentAlreadyDone(t *testing.T) {
	cause := errors.New("gone")
	parent, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	c := newAttemptCtx(parent, time.Now(), time.Minute)
	closedWithin(t, c.Done(), 0, "attempt of a dead parent")
	if c.Err() != context.Canceled || context.Cause(c) != cause {
		t.Fatalf("Err %v, Cause %v", c.Err(), context.Cause(c))
	}
	if c.timer != nil {
		t.Fatal("a timer was set for a context born dead")
	}
	c0 := newAttemptCtx(context.Background(), time.Now(), 0)
	if c0.Err() != context.DeadlineExceeded || c0.timer != nil {
		t.Fatalf("zero timeout: Err %v, timer %v", c0.Err(), c0.timer)
	}
}

func TestAttemptCtxShorterParentDeadlineKept(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	got, own := withAttemptDeadline(parent, time.Now(), time.Minute)
	if got != parent || own != nil {
		t.Fatal("a parent with a shorter deadline was not kept as is")
	}
	got, own = withAttemptDeadline(parent, time.Now(), time.Millisecond)
	defer own.release()
	if got == parent || own == nil {
		t.Fatal("a shorter attempt timeout made no context")
	}
}

// TestAttemptCtxChildren: the children context.WithCancel makes (grpc-go
// makes one per call) end when the attempt ends, by release, by its timer
// or through its parent, and a child cancelled first leaves the attempt's
// registrations.
func TestAttemptCtxChildren(t *testing.T) {
	t.Run("release", func(t *testing.T) {
		c := newAttemptCtx(context.Background(), time.Now(), time.Minute)
		child, ccancel := context.WithCancel(c)
		defer ccancel()
		if c.first == nil {
			t.Fatal("the child did not register through AfterFunc")
		}
		if dl, ok := child.Deadline(); !ok || !dl.Equal(c.deadline) {
			t.Fatalf("child's Deadline %v %v", dl, ok)
		}
		c.release()
		closedWithin(t, child.Done(), time.Second, "child")
		if child.Err() != context.Canceled {
			t.Fatalf("child Err %v", child.Err())
		}
	})
	t.Run("timer", func(t *testing.T) {
		c := newAttemptCtx(context.Background(), time.Now(), 20*time.Millisecond)
		defer c.release()
		child, ccancel := context.WithCancel(c)
		defer ccancel()
		grand, gcancel := context.WithCancel(child) // a stdlib child of the child: the map path
		defer gcancel()
		closedWithin(t, grand.Done(), 2*time.Second, "grandchild")
		if child.Err() != context.DeadlineExceeded || grand.Err() != context.DeadlineExceeded {
			t.Fatalf("Err: child %v, grandchild %v", child.Err(), grand.Err())
		}
		if context.Cause(child) != context.DeadlineExceeded {
			t.Fatalf("child's Cause %v", context.Cause(child))
		}
	})
	t.Run("child first", func(t *testing.T) {
		c := newAttemptCtx(context.Background(), time.Now(), time.Minute)
		defer c.release()
		a, acancel := context.WithCancel(c)
		b, bcancel := context.WithCancel(c)
		d, dcancel := context.WithCancel(c)
		defer dcancel()
		c.mu.Lock()
		n := len(c.more)
		c.mu.Unlock()
		if c.first == nil || n != 2 {
			t.Fatalf("registrations: first %v, more %d; want 1 and 2", c.first != nil, n)
		}
		acancel()
		bcancel()
		c.mu.Lock()
		left, n := c.first != nil, len(c.more)
		c.mu.Unlock()
		if left || n != 1 {
			t.Fatalf("after two children cancelled: first %v, more %d; want false, 1", left, n)
		}
		if a.Err() != context.Canceled || b.Err() != context.Canceled || c.Err() != nil || d.Err() != nil {
			t.Fatalf("Err: a %v b %v attempt %v d %v", a.Err(), b.Err(), c.Err(), d.Err())
		}
		// A new child takes the free slot; the old child's stop must not free it.
		e, ecancel := context.WithCancel(c)
		defer ecancel()
		acancel()
		c.release()
		closedWithin(t, e.Done(), time.Second, "child in the reused slot")
		closedWithin(t, d.Done(), time.Second, "child in the map")
	})
	t.Run("AfterFunc", func(t *testing.T) {
		c := newAttemptCtx(context.Background(), time.Now(), time.Minute)
		ran := make(chan struct{})
		stop := context.AfterFunc(c, func() { close(ran) })
		never := context.AfterFunc(c, func() { t.Error("a stopped AfterFunc ran") })
		if !never() {
			t.Fatal("stop before the end returned false")
		}
		c.release()
		closedWithin(t, ran, time.Second, "AfterFunc's f")
		if stop() {
			t.Fatal("stop after f started returned true")
		}
	})
}

// TestAttemptCtxAfterFuncOnEnded: AfterFunc on an ended context runs f, but
// not on the caller's goroutine: the context package calls it holding the
// child's lock, which f takes (a synchronous f deadlocked the first draft
// of the spike under TestAttemptCtxErrAfterDone).
func TestAttemptCtxAfterFuncOnEnded(t *testing.T) {
	c := newAttemptCtx(context.Background(), time.Now(), time.Minute)
	c.release()
	var mu sync.Mutex
	ran := make(chan struct{})
	mu.Lock() // as propagateCancel holds the child's lock
	stop := c.AfterFunc(func() { mu.Lock(); close(ran); mu.Unlock() })
	mu.Unlock()
	closedWithin(t, ran, time.Second, "f registered on an ended context")
	if stop() {
		t.Fatal("stop of a func on an ended context returned true")
	}
}

// TestAttemptCtxNoGoroutinePerChild: a thousand live children of live
// attempts cost no goroutine; the same children of a context hiding its
// AfterFunc method cost one each, which shows the check can fail.
func TestAttemptCtxNoGoroutinePerChild(t *testing.T) {
	const n = 1000
	count := func(wrap func(*attemptCtx) context.Context) int {
		base := runtime.NumGoroutine()
		var cs []*attemptCtx
		var cancels []context.CancelFunc
		for range n {
			c := newAttemptCtx(context.Background(), time.Now(), time.Minute)
			_, cancel := context.WithCancel(wrap(c))
			cs, cancels = append(cs, c), append(cancels, cancel)
		}
		grown := runtime.NumGoroutine() - base
		for i := range cs {
			cancels[i]()
			cs[i].release()
		}
		return grown
	}
	if g := count(func(c *attemptCtx) context.Context { return c }); g > 10 {
		t.Fatalf("%d goroutines for %d children", g, n)
	}
	type hidden struct{ context.Context }
	if g := count(func(c *attemptCtx) context.Context { return hidden{c} }); g < n {
		t.Fatalf("control: only %d goroutines for %d children of a context without AfterFunc", g, n)
	}
	deadline := time.Now().Add(2 * time.Second) // the control's goroutines end
	for runtime.NumGoroutine() > 10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// TestAttemptCtxErrAfterDone: whoever sees Done closed sees Err set, on
// each of the three ways to end, racing.
func TestAttemptCtxErrAfterDone(t *testing.T) {
	for i := range 2000 {
		parent, pcancel := context.WithCancel(context.Background())
		c := newAttemptCtx(parent, time.Now(), time.Duration(i%50)*time.Microsecond)
		child, ccancel := context.WithCancel(c)
		var wg sync.WaitGroup
		for _, ctx := range []context.Context{c, child} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ctx.Done()
				if ctx.Err() == nil {
					t.Error("Done closed with Err nil")
				}
			}()
		}
		switch i % 3 {
		case 0:
			go c.release()
		case 1:
			go pcancel()
		}
		go ccancel()
		wg.Wait()
		c.release()
		pcancel()
	}
}

// TestAttemptCtxCauseDeviation records where the spike differs from
// context.WithTimeout: an attempt that timed out, under a parent cancelled
// afterwards with a cause. context.Cause finds the innermost *cancelCtx
// through Value(&cancelCtxKey), a key of the context package's own that
// another type cannot answer, so it finds the parent's cause.
func TestAttemptCtxCauseDeviation(t *testing.T) {
	cause := errors.New("later")
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	std, stdCancel := context.WithTimeout(parent, time.Millisecond)
	defer stdCancel()
	c := newAttemptCtx(parent, time.Now(), time.Millisecond)
	defer c.release()
	<-std.Done()
	<-c.Done()
	cancel(cause)
	if got := context.Cause(std); got != context.DeadlineExceeded {
		t.Fatalf("stdlib: Cause %v", got)
	}
	if got := context.Cause(c); got != cause {
		t.Fatalf("spike: Cause %v (the deviation this test records is gone?)", got)
	}
	t.Logf("Cause after timeout then parent cancel: stdlib %v, spike %v", context.Cause(std), context.Cause(c))
}

// TestAttemptCtxLoopback: over real gRPC, an attempt context ends a call to
// a server that hangs: the caller gets DEADLINE_EXCEEDED within the timeout
// and the server sees the call cancelled (grpc-go's child of the attempt
// context was cancelled and reset the stream); a healthy call succeeds
// and leaves no registration behind.
func TestAttemptCtxLoopback(t *testing.T) {
	srv, err := faultserver.Start(server.Hang)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cc, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := inventoryv1.NewInventoryServiceClient(cc)
	for _, parentCancellable := range []bool{false, true} {
		parent, pcancel := context.Background(), context.CancelFunc(func() {})
		if parentCancellable {
			parent, pcancel = context.WithCancel(parent)
		}
		before := srv.Cancelled(inventoryv1.InventoryService_GetStock_FullMethodName)
		start := time.Now()
		c := newAttemptCtx(parent, start, 100*time.Millisecond)
		_, err := client.GetStock(c, request)
		took := time.Since(start)
		c.release()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("parent cancellable %v: code %v (%v), want DeadlineExceeded", parentCancellable, status.Code(err), err)
		}
		if took < 100*time.Millisecond || took > 2*time.Second {
			t.Fatalf("parent cancellable %v: ended after %v, timeout 100ms", parentCancellable, took)
		}
		wait := time.Now().Add(2 * time.Second)
		for srv.Cancelled(inventoryv1.InventoryService_GetStock_FullMethodName) == before && time.Now().Before(wait) {
			time.Sleep(time.Millisecond)
		}
		if srv.Cancelled(inventoryv1.InventoryService_GetStock_FullMethodName) == before {
			t.Fatalf("parent cancellable %v: the server never saw the call cancelled", parentCancellable)
		}
		pcancel()
	}
	srv.SetBehaviour(server.Healthy)
	c := newAttemptCtx(context.Background(), time.Now(), time.Second)
	if _, err := client.GetStock(c, request); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	left := c.first != nil || len(c.more) > 0
	c.mu.Unlock()
	if left {
		t.Fatal("a finished call left its child registered on the attempt context")
	}
	c.release()
	// The caller's cancel ends the call too.
	srv.SetBehaviour(server.Hang)
	parent, pcancel := context.WithCancel(context.Background())
	c = newAttemptCtx(parent, time.Now(), time.Minute)
	time.AfterFunc(50*time.Millisecond, pcancel)
	if _, err := client.GetStock(c, request); status.Code(err) != codes.Canceled {
		t.Fatalf("caller's cancel: code %v (%v), want Canceled", status.Code(err), err)
	}
	c.release()
}
