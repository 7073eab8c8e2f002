package runtime_test

// Attacks on what the README's Metrics and "Logs and events" sections
// promise of streams: each stream counts once in attempts_total (at its
// first message, or at its end without one), refusals are counted where
// they happen, bulkhead_in_use comes back to 0 after every ending, and the
// breaker's transitions reach the observer once each, with the gauges and
// counters agreeing with the events.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
)

// atk22eSeries gathers reg and returns every counter and gauge of the
// runtime as "name{label=value,...}" → value, the dependency label left
// out, series at zero left out, so that a test can compare the whole
// exposition with what it expects.
func atk22eSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			default:
				continue
			}
			if v == 0 {
				continue
			}
			var ls []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "dependency" {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
			}
			sort.Strings(ls)
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

func atk22eWantSeries(t *testing.T, reg *prometheus.Registry, want map[string]float64, after string) {
	t.Helper()
	got := atk22eSeries(t, reg)
	var diff []string
	for k, v := range want {
		if got[k] != v {
			diff = append(diff, fmt.Sprintf("%s = %v, want %v", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s = %v, want none", k, v))
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Fatalf("after %s:\n%s", after, strings.Join(diff, "\n"))
	}
}

// atk22eEvents records an observer's events.
type atk22eEvents struct {
	mu sync.Mutex
	ev []runtime.Event
}

func (r *atk22eEvents) observe(e runtime.Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

func (r *atk22eEvents) all() []runtime.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runtime.Event(nil), r.ev...)
}

// Every way a bidirectional stream ends counts it once in attempts_total,
// under the code its end says (a stream that had a message is a success
// however it ends later), and bulkhead_in_use is back at 0 after each; a
// refused stream counts a rejection and no attempt. A breaker that never
// moves reports no event.
func TestAttack22eEveryStreamEndingCountsOnceInTheMetrics(t *testing.T) {
	atkNoLeak(t)
	reg := prometheus.NewRegistry()
	var evs atk22eEvents
	e, rt, h := atkChatClient(t, 150*time.Millisecond, 100, runtime.WithRegisterer(reg), runtime.WithObserver(evs.observe))
	ctx := context.Background()
	want := map[string]float64{}
	open := func(ctx context.Context) grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue] {
		t.Helper()
		st, err := h.Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// A message, then the server fails the stream: one success.
	st := open(ctx)
	if err := st.Send(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(wrapperspb.String("fail")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE", err)
	}
	_, _ = st.Recv() // past the end: counted nowhere
	_ = st.CloseSend()
	_ = st.CloseSend()
	want["resilient_client_attempts_total{code=OK,method=Chat}"] = 1
	atk22eWantSeries(t, reg, want, "a message and then UNAVAILABLE")

	// The server fails it before any message: one UNAVAILABLE.
	atkFailChats(t, h, 1)
	want["resilient_client_attempts_total{code=UNAVAILABLE,method=Chat}"] = 1
	atk22eWantSeries(t, reg, want, "UNAVAILABLE at once")

	// Read to io.EOF, then Header and Trailer on the ended stream.
	st = open(ctx)
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	_, _ = st.Header()
	_ = st.Trailer()
	want["resilient_client_attempts_total{code=OK,method=Chat}"] = 2
	atk22eWantSeries(t, reg, want, "io.EOF")

	// Cancelled by its caller while a Recv waits: counted under CANCELLED,
	// once, the Recv's return and the context's AfterFunc both ending it.
	cctx, cancel := context.WithCancel(ctx)
	st = open(cctx)
	if err := st.Send(wrapperspb.String("hang")); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("got %v, want CANCELED", err)
	}
	atkWantFree(t, rt, atkChat, "a cancel during Recv")
	want["resilient_client_attempts_total{code=CANCELLED,method=Chat}"] = 1
	atk22eWantSeries(t, reg, want, "a cancel during Recv")

	// Abandoned while holding the only permit: a second stream is
	// refused (a rejection, no attempt); the first's timeout ends it, a
	// DEADLINE_EXCEEDED, with nobody reading.
	st = open(ctx)
	if err := st.Send(wrapperspb.String("hang")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Call(ctx); !errors.Is(err, runtime.ErrBulkheadFull) {
		t.Fatalf("a second stream: got %v, want ErrBulkheadFull", err)
	}
	want["resilient_client_bulkhead_rejections_total{method=Chat}"] = 1
	want["resilient_client_bulkhead_in_use{bulkhead=shared}"] = 1
	atk22eWantSeries(t, reg, want, "a refusal beside an open stream")
	atkWantFree(t, rt, atkChat, "the abandoned stream's timeout")
	delete(want, "resilient_client_bulkhead_in_use{bulkhead=shared}")
	want["resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=Chat}"] = 1
	atk22eWantSeries(t, reg, want, "the abandoned stream's timeout")
	st = nil

	// A context already over: nothing counted at all.
	dead, kill := context.WithCancel(ctx)
	kill()
	if _, err := h.Call(dead); status.Code(err) != codes.Canceled {
		t.Fatalf("a dead context: got %v, want CANCELED", err)
	}
	atk22eWantSeries(t, reg, want, "a dead context")

	if got := e.opened.Load(); got != 5 {
		t.Errorf("the server saw %d streams, want 5", got)
	}
	if got := evs.all(); len(got) != 0 {
		t.Errorf("events with the breaker closed throughout: %+v", got)
	}
}

// A breaker only streams go through: two failures open it, the stream
// opened after the cool-down takes it half-open and, abandoned by its
// caller with nothing received, opens it again at its timeout (on the
// runtime's goroutine); the next probe's first message closes it. Each
// transition is one event, with no error, and breaker_state,
// breaker_transitions_total and breaker_rejections_total agree with them.
func TestAttack22eStreamProbeTransitionsAgreeWithTheMetrics(t *testing.T) {
	atkNoLeak(t)
	reg := prometheus.NewRegistry()
	var evs atk22eEvents
	clk := newAtkClock()
	_, rt, h := atkChatClient(t, 100*time.Millisecond, 2, runtime.WithClock(clk), runtime.WithRegisterer(reg), runtime.WithObserver(evs.observe))
	ctx := context.Background()

	atkFailChats(t, h, 2)
	atkWantBreaker(t, rt, atkChat, runtime.StateOpen, "after two failures")
	if _, err := h.Call(ctx); !errors.Is(err, runtime.ErrCircuitOpen) {
		t.Fatalf("while open: got %v, want ErrCircuitOpen", err)
	}
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=Chat}":         2,
		"resilient_client_breaker_state{breaker=shared}":                        2,
		"resilient_client_breaker_transitions_total{breaker=shared,state=open}": 1,
		"resilient_client_breaker_rejections_total{method=Chat}":                1,
	}, "the breaker opened")

	// The probe, abandoned: no Recv, no cancel.
	clk.Advance(time.Second)
	st, err := h.Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(wrapperspb.String("hang")); err != nil {
		t.Fatal(err)
	}
	atkWantBreaker(t, rt, atkChat, runtime.StateHalfOpen, "the probe opened")
	st = nil
	atkWaitFor(t, "the abandoned probe's timeout to open the breaker", func() bool {
		s, _ := rt.BreakerState(atkChat)
		return s == runtime.StateOpen
	})
	atkWantFree(t, rt, atkChat, "the abandoned probe")

	// The next probe's first message closes it.
	clk.Advance(time.Second)
	st, err = h.Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	atkWantBreaker(t, rt, atkChat, runtime.StateClosed, "the probe's first message")
	_ = st.CloseSend()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	atkWantFree(t, rt, atkChat, "the last probe's io.EOF")
	atk22eWantSeries(t, reg, map[string]float64{
		"resilient_client_attempts_total{code=UNAVAILABLE,method=Chat}":              2,
		"resilient_client_attempts_total{code=DEADLINE_EXCEEDED,method=Chat}":        1,
		"resilient_client_attempts_total{code=OK,method=Chat}":                       1,
		"resilient_client_breaker_transitions_total{breaker=shared,state=open}":      2,
		"resilient_client_breaker_transitions_total{breaker=shared,state=half-open}": 2,
		"resilient_client_breaker_transitions_total{breaker=shared,state=closed}":    1,
		"resilient_client_breaker_rejections_total{method=Chat}":                     1,
	}, "the breaker closed")

	// The shared breaker's, each with a cause.
	atk22eWantCycle(t, evs.all(), func(e runtime.Event) bool {
		return e.Cause != "" && e.Dependency == "atk.Echo" && e.Method == ""
	})
}
