package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/runtime/policy"
)

// reapClient is a client of one server-streaming method on a bulkhead of
// one permit, with a breaker that opens at its first failure (a
// DEADLINE_EXCEEDED) and an observer that panics when it opens.
func reapClient(t *testing.T) *methodState {
	t.Helper()
	c, err := NewClient(&policy.Service{
		Name: "resilient.test.Reap",
		Breaker: &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 1, Window: 10 * time.Second, CoolDown: time.Second,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.DeadlineExceeded)},
		Bulkhead: &policy.Bulkhead{Permits: 1},
		Methods:  []policy.Method{{Name: "/resilient.test.Reap/Watch", Kind: policy.KindServerStreaming, Timeout: time.Minute}},
	}, WithObserver(func(e Event) {
		if e.Kind == EventBreakerTransition && e.To == StateOpen {
			panic("reap: observer panics at open")
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c.methods[0]
}

// openedStream is a stream of m holding its permit and its ticket, whose
// own context is over (its timeout passed) while its caller's is not, as
// NewStream leaves one before the AfterFunc runs.
func openedStream(t *testing.T, m *methodState, callerCtx context.Context) *stream {
	t.Helper()
	if _, err := m.acquirePermit(callerCtx); err != nil {
		t.Fatal(err)
	}
	tk, start, _, ok := m.admitAs(false)
	if !ok {
		t.Fatal("the breaker refused the stream")
	}
	s := &stream{m: m, callerCtx: callerCtx, holdsPermit: true, admitted: true, ticket: tk, start: start}
	s.ctx, s.cancel = context.WithDeadline(callerCtx, time.Now().Add(-time.Second))
	m.bulkhead.streams.add(s)
	return s
}

func reapPanic(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestReapLeavesAnObservedEndingToTheStream: a call that finds the bulkhead
// full of a stream whose timeout just passed takes the permit it held, but
// does not run that stream's ending, whose failure opens the breaker and
// whose observer panics there: the panic is the stream's caller's, not
// that of a call which has nothing to do with the stream. Before, the
// reap ran the ending and the unrelated call received the panic. The
// stream's own ending runs it afterwards.
func TestReapLeavesAnObservedEndingToTheStream(t *testing.T) {
	m := reapClient(t)
	s := openedStream(t, m, context.Background())
	if p := reapPanic(func() {
		if _, err := m.acquirePermit(context.Background()); err != nil {
			t.Errorf("a call on the bulkhead the ended stream filled: %v, want its permit", err)
			return
		}
		m.releasePermit()
	}); p != nil {
		t.Fatalf("the unrelated call received the stream's panic: %v", p)
	}
	if st := m.breaker.stateAt(m.client.now()); st != StateClosed {
		t.Fatalf("the breaker is %v after the reap, want closed: the stream's failure is its own to tell", st)
	}
	p := reapPanic(s.contextEnded) // the stream's own ending, no call in progress
	if p == nil || !strings.Contains(fmt.Sprint(p), "reap: observer panics at open") {
		t.Fatalf("the stream's own ending: panic %v, want the observer's", p)
	}
	if st := m.breaker.stateAt(m.client.now()); st != StateOpen {
		t.Errorf("the breaker is %v after the stream's ending, want open", st)
	}
	if n := m.bulkhead.taken(); n != 0 {
		t.Errorf("%d permits taken after the reap and the ending, want 0 (the permit given back once)", n)
	}
}

// TestReapEndsACancelledStreamAtOnce: a stream its caller cancelled tells
// the breaker nothing, so no observer can run in its ending: the call that
// finds the bulkhead full ends it whole, and the stream's own ending that
// comes after finds nothing to do.
func TestReapEndsACancelledStreamAtOnce(t *testing.T) {
	m := reapClient(t)
	callerCtx, cancel := context.WithCancel(context.Background())
	s := openedStream(t, m, callerCtx)
	cancel()
	if _, err := m.acquirePermit(context.Background()); err != nil {
		t.Fatalf("a call on the bulkhead the cancelled stream filled: %v, want its permit", err)
	}
	m.releasePermit()
	if !s.recorded {
		t.Error("the reap left the cancelled stream's ending undone")
	}
	if m.bulkhead.streams.n.Load() != 0 {
		t.Error("the cancelled stream is still counted among the bulkhead's streams")
	}
	s.contextEnded()
	if n := m.bulkhead.taken(); n != 0 {
		t.Errorf("%d permits taken, want 0", n)
	}
	if st := m.breaker.stateAt(m.client.now()); st != StateClosed {
		t.Errorf("the breaker is %v after a cancelled stream, want closed", st)
	}
}
