package runtime_test

// A storm of streams of the three kinds, each ended a different way
// (read to the end, a server's UNAVAILABLE after messages, cancelled while
// in Recv, cancelled in no call, its own timeout on a hung server, the
// server answering before the client closed and the caller dropping it
// at Send's io.EOF, a panic between reads with a deferred cancel), many
// at once on a bulkhead of 4 permits: when the storm is over every
// permit is back, bulkhead_in_use reads 0, and each stream opened is
// counted exactly once in attempts_total, each refused once in
// bulkhead_rejections_total. Run under -race, it is also the test of
// concurrent endings of one stream racing each other (an AfterFunc's
// cancel against a Recv's error, a Send's io.EOF against the context).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func TestAttack24eStreamStormGivesEveryPermitBackAndCountsEachOnce(t *testing.T) {
	t.Run("quiet breaker", func(t *testing.T) { atk24eStorm(t, false) })
	// With an observer the streams count their calls in progress (busy)
	// and leave an observed ending to the call; the breaker opens, goes
	// half-open after 20 ms and closes or opens again under the storm (a failure ratio of 10 %: about a fifth of the mix fails), its
	// probes taken by streams (a breaker of streams alone).
	t.Run("moving breaker, observed", func(t *testing.T) { atk24eStorm(t, true) })
}

func atk24eStorm(t *testing.T, moving bool) {
	atkNoLeak(t)
	cc := atk24eServer(t)
	reg := prometheus.NewRegistry()
	var ms []policy.Method
	for _, n := range []struct {
		name string
		kind policy.Kind
	}{{atk24eWatch, policy.KindServerStreaming}, {atk24eUpload, policy.KindClientStreaming}, {atk24eChat, policy.KindBidiStreaming}} {
		ms = append(ms, policy.Method{Name: n.name, Kind: n.kind, Timeout: 80 * time.Millisecond,
			Bulkhead: &policy.Bulkhead{Permits: 4}})
	}
	// A breaker that never opens (its ratio is never reached by the mix),
	// so that its tickets are taken and given back by every stream.
	br := &policy.Breaker{FailureRatio: 1, MinimumCalls: 1000, Window: time.Minute, CoolDown: time.Minute, HalfOpenProbes: 1,
		FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
	opts := []runtime.Option{runtime.WithRegisterer(reg)}
	var transitions atomic.Int64
	if moving {
		br = &policy.Breaker{FailureRatio: 0.1, MinimumCalls: 4, Window: time.Second, CoolDown: 20 * time.Millisecond, HalfOpenProbes: 2,
			FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
		opts = append(opts, runtime.WithObserver(func(e runtime.Event) {
			if e.Kind == runtime.EventBreakerTransition {
				transitions.Add(1)
			}
		}))
	}
	rt, err := runtime.NewClient(&policy.Service{Name: "atk24e.S", Methods: ms, Breaker: br}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conn := rt.Conn(cc)
	methods := []string{atk24eWatch, atk24eUpload, atk24eChat}
	var opened, refused, open [3]atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Moving, the storm lasts long enough for the breaker to open,
			// cool down and be probed again a few times.
			for i := 0; i < 30 || moving && time.Since(began) < 600*time.Millisecond && i < 2000; i++ {
				mi := (w + i) % 3
				m := methods[mi]
				ending := (w*7 + i) % 7
				first := []string{"ok", "some", "hang", "hang", "hang", "early", "ok"}[ending]
				func() {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					octx := ctx
					if ending == 4 {
						octx = context.Background() // only the stream's timeout ends it
					}
					cs, err := atk24eOpen(octx, conn, m, first)
					if errors.Is(err, runtime.ErrBulkheadFull) {
						refused[mi].Add(1)
						time.Sleep(time.Millisecond) // a caller that waits a little before trying again
						return
					}
					if errors.Is(err, runtime.ErrCircuitOpen) {
						open[mi].Add(1)
						time.Sleep(time.Millisecond)
						return
					}
					opened[mi].Add(1)
					if err != nil {
						return // the request of a server stream failed: the stream is over
					}
					switch ending {
					case 0, 1: // to the end
						if m != atk24eWatch {
							_ = cs.CloseSend()
						}
						_ = atk24eRecvAll(cs)
					case 2: // cancelled while in Recv
						go func() { time.Sleep(time.Millisecond); cancel() }()
						_ = atk24eRecvAll(cs)
					case 3: // cancelled in no call
						cancel()
					case 4: // its own timeout, nobody reading nor cancelling
					case 5: // the server answered first: Send until io.EOF, then drop
						if m == atk24eWatch {
							_ = atk24eRecvAll(cs)
							return
						}
						for k := 0; k < 1000 && cs.SendMsg(wrapperspb.String("x")) == nil; k++ {
							time.Sleep(100 * time.Microsecond)
						}
					case 6: // a panic between reads, a deferred cancel
						defer func() { _ = recover() }()
						defer cancel()
						if m == atk24eUpload {
							_ = cs.CloseSend()
						}
						_ = cs.RecvMsg(new(wrapperspb.StringValue))
						panic("caller's bug")
					}
				}()
			}
		}()
	}
	wg.Wait()
	for mi, m := range methods {
		atkWantFree(t, rt, m, "the storm")
		series := atk22eSeries(t, reg)
		short := atk24eShort(m)
		atkWaitFor(t, short+" counted", func() bool {
			var sum float64
			for _, v := range atk24eAttempts(t, reg, m) {
				sum += v
			}
			return sum >= float64(opened[mi].Load())
		})
		time.Sleep(20 * time.Millisecond)
		var sum float64
		for _, v := range atk24eAttempts(t, reg, m) {
			sum += v
		}
		if int64(sum) != opened[mi].Load() {
			t.Errorf("%s: attempts_total %v in all, want %d (each stream opened once)", short, sum, opened[mi].Load())
		}
		if got := series[fmt.Sprintf("resilient_client_bulkhead_rejections_total{method=%s}", short)]; int64(got) != refused[mi].Load() {
			t.Errorf("%s: bulkhead_rejections_total %v, want %d", short, got, refused[mi].Load())
		}
		if got := atk24eDurations(t, reg, short); got != uint64(opened[mi].Load()) {
			t.Errorf("%s: attempt_duration_seconds counts %d, want %d (each stream opened once)", short, got, opened[mi].Load())
		}
		if got, ok := series[fmt.Sprintf("resilient_client_bulkhead_in_use{bulkhead=%s}", short)]; ok && got != 0 {
			t.Errorf("%s: bulkhead_in_use %v after the storm, want 0", short, got)
		}
		if got := series[fmt.Sprintf("resilient_client_breaker_rejections_total{method=%s}", short)]; int64(got) != open[mi].Load() {
			t.Errorf("%s: breaker_rejections_total %v, want %d", short, got, open[mi].Load())
		}
		if opened[mi].Load() == 0 {
			t.Errorf("%s: no stream opened", short)
		}
		t.Logf("%s: %d opened, %d refused, attempts %v, breaker rejections %v", short, opened[mi].Load(), refused[mi].Load(),
			atk24eAttempts(t, reg, m), series[fmt.Sprintf("resilient_client_breaker_rejections_total{method=%s}", short)])
		if !moving {
			atk24eWantExactN(t, rt, conn, m, 4)
		}
	}
	if moving {
		t.Logf("%d transitions", transitions.Load())
		if transitions.Load() < 2 {
			t.Error("the breaker never moved: the storm tested nothing of its endings")
		}
	}
}

// atk24eDurations is the sample count of attempt_duration_seconds of the
// method named short.
func atk24eDurations(t *testing.T, reg *prometheus.Registry, short string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "resilient_client_attempt_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == short {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}
