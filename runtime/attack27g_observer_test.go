package runtime_test

// Attacks on today's emitAll (README, "Logs and events"): the logger and
// the observers are one list of sinks; "one of them that panics (an
// observer, the logger's handler) takes the event from none of the
// others, which receive it before the panic goes on", and emitAll's own
// word is that "the first panic goes on". Two sinks that panic, a panic
// with nil, a sink that ends its goroutine (runtime.Goexit, as t.FailNow
// does), events raised on a hedged copy's goroutine, and each sink's count
// of one event reported once per episode.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

func atk27gOpened(e runtime.Event) bool {
	return e.Kind == runtime.EventBreakerTransition && e.To == runtime.StateOpen
}

// atk27gSink counts the breaker openings it is given, then does what act
// does (panic, Goexit, nothing).
type atk27gSink struct {
	opened atomic.Int32
	act    func()
}

func (s *atk27gSink) observe(e runtime.Event) {
	if atk27gOpened(e) {
		s.opened.Add(1)
		if s.act != nil {
			s.act()
		}
	}
}

// atk27gLogged counts the log's "circuit breaker open" lines.
func atk27gLogged(l *attack25aLog) int {
	n := 0
	for _, line := range l.lines() {
		if strings.Contains(line, `msg="circuit breaker open"`) {
			n++
		}
	}
	return n
}

// atk27gOpenRig is a runtime client for GetStock against a server that
// fails every call UNAVAILABLE, its breaker opened by the second call
// (minimum_calls 2), on a fake clock, with a logger and the sinks given as
// observers in order.
func atk27gOpenRig(t *testing.T, sinks ...*atk27gSink) (call func() (error, any), log *attack25aLog) {
	_, cc := start(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	log = &attack25aLog{}
	opts := []runtime.Option{runtime.WithClock(newFakeClock()), runtime.WithRegisterer(prometheus.NewRegistry()),
		runtime.WithLogger(log.logger())}
	for _, s := range sinks {
		opts = append(opts, runtime.WithObserver(s.observe))
	}
	rt := inventory(t, policy.Service{Breaker: breakerPolicy(2, 1)}, opts...)
	plain := inventoryv1.NewInventoryServiceClient(cc)
	return func() (err error, panicked any) {
		defer func() { panicked = recover() }()
		_, err = runtime.Unary(context.Background(), rt.Method(0), "", &inventoryv1.GetStockRequest{Sku: "a"}, nil, plain.GetStock, nil)
		return err, nil
	}, log
}

// TestAttack27GTwoPanickingObserversTheFirstPanicGoesOn: a logger and
// three observers, the first two of which panic at the breaker's opening
// ("first", "second"). Each sink must be given the event once (none
// twice, none skipped), and, by emitAll's word, the first panic goes on to
// the caller. It reaches the caller as the second's today: the first's
// recovery calls the sinks after it, and the second's panic, raised again
// there, replaces it.
func TestAttack27GTwoPanickingObserversTheFirstPanicGoesOn(t *testing.T) {
	atkNoLeak(t)
	first := &atk27gSink{act: func() { panic("first observer") }}
	second := &atk27gSink{act: func() { panic("second observer") }}
	third := &atk27gSink{}
	call, log := atk27gOpenRig(t, first, second, third)
	if err, p := call(); status.Code(err) != codes.Unavailable || p != nil {
		t.Fatalf("first call: %v, panic %v; want UNAVAILABLE", err, p)
	}
	_, p := call() // opens the breaker
	for range 3 {
		if err, p := call(); !errors.Is(err, runtime.ErrCircuitOpen) || p != nil {
			t.Fatalf("call on the open breaker: %v, panic %v; want ErrCircuitOpen", err, p)
		}
	}
	counts := []int{atk27gLogged(log), int(first.opened.Load()), int(second.opened.Load()), int(third.opened.Load())}
	if counts[0] != 1 || counts[1] != 1 || counts[2] != 1 || counts[3] != 1 {
		t.Errorf("the breaker opened once; the logger and the three observers were given it %v times, want once each", counts)
	}
	if p != "first observer" {
		t.Errorf("README Logs and events: a panicking sink takes the event from none of the others, and (emitAll) the first "+
			"panic goes on to the caller. Two observers panicked at the breaker's opening, each given it once (sinks %v); "+
			"the caller got %q, want %q", counts, p, "first observer")
	}
}

// TestAttack27GNilPanicInAnObserverReachesTheCaller: an observer that
// panics with nil (a *runtime.PanicNilError since Go 1.21) takes the event
// from none of the observers after it, and its panic still reaches the
// caller.
func TestAttack27GNilPanicInAnObserverReachesTheCaller(t *testing.T) {
	atkNoLeak(t)
	nilPanic := &atk27gSink{act: func() { panic(nil) }}
	after := &atk27gSink{}
	call, log := atk27gOpenRig(t, nilPanic, after)
	_, _ = call()
	_, p := call()
	var pn *goruntime.PanicNilError
	if e, ok := p.(error); !ok || !errors.As(e, &pn) {
		t.Errorf("the observer panicked with nil at the breaker's opening; the caller got %v (%T), want a *runtime.PanicNilError", p, p)
	}
	if n, m, l := nilPanic.opened.Load(), after.opened.Load(), atk27gLogged(log); n != 1 || m != 1 || l != 1 {
		t.Errorf("the breaker's opening was given to the nil-panicking observer %d, the next %d, the logger %d times, want once each", n, m, l)
	}
}

// TestAttack27GGoexitInAnObserverTakesTheEventFromNone: README, Logs and
// events: observers are for recording events "in tests", and each event is
// reported once; one sink "takes the event from none of the others". A
// test's observer that calls t.FailNow (runtime.Goexit) at the breaker's
// opening, on the goroutine of the call that opened it (the test's own,
// where FailNow belongs): the goroutine ends, as FailNow means it to, but
// the observer after it never gets the event, for the whole episode (its
// recovery sees no panic and calls nobody).
func TestAttack27GGoexitInAnObserverTakesTheEventFromNone(t *testing.T) {
	atkNoLeak(t)
	exits := &atk27gSink{act: goruntime.Goexit}
	after := &atk27gSink{}
	call, log := atk27gOpenRig(t, exits, after)
	_, _ = call()
	done, returned := make(chan struct{}), false
	go func() {
		defer close(done)
		_, _ = call() // opens the breaker: exits, the goroutine ends here
		returned = true
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call whose observer called runtime.Goexit neither returned nor ended in 5 s")
	}
	for range 3 {
		if err, p := call(); !errors.Is(err, runtime.ErrCircuitOpen) || p != nil {
			t.Fatalf("call on the open breaker: %v, panic %v; want ErrCircuitOpen", err, p)
		}
	}
	if returned {
		t.Errorf("the call whose observer called runtime.Goexit returned: its goroutine should have ended")
	}
	if n, m, l := exits.opened.Load(), after.opened.Load(), atk27gLogged(log); n != 1 || m != 1 || l != 1 {
		t.Errorf("README Logs and events: each event reported once, one sink taking it from none of the others. An observer "+
			"that ended its goroutine (runtime.Goexit, as t.FailNow) at the breaker's opening was given it %d time(s), the "+
			"observer after it %d, the logger (before it) %d: want 1, 1, 1", n, m, l)
	}
}

// atk27gHedgedOpener is the generated client's GetStock hedged (delay
// delay, 2 copies, UNAVAILABLE non-fatal) against a server failing every
// call UNAVAILABLE, its breaker opened by minCalls failures, on a fake
// clock, with the logger and the observers given.
func atk27gHedgedOpener(t *testing.T, minCalls int, delay time.Duration, log *attack25aLog, obs ...func(runtime.Event)) *inventoryv1.InventoryServiceResilientClient {
	_, cc := startFault(t, server.Fail(codes.Unavailable))
	readyConn(t, cc)
	opts := []runtime.Option{runtime.WithClock(newAtkClock()), runtime.WithRegisterer(prometheus.NewRegistry())}
	if log != nil {
		opts = append(opts, runtime.WithLogger(log.logger()))
	}
	for _, o := range obs {
		opts = append(opts, runtime.WithObserver(o))
	}
	return atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts}, func(p *policy.Service) {
		p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
		p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: minCalls, Window: time.Minute, CoolDown: time.Minute,
			HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
		p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
		m := atkMethod(p, atkGetStock)
		m.Retry, m.Timeout, m.OverallTimeout = nil, 10*time.Second, 0
		atk27bHedged(m, delay, codes.Unavailable)
	})
}

// TestAttack27GGoexitInAnObserverOnAHedgedCopyHoldsTheCall: README, Logs
// and events: the observer "runs on the goroutine of the call ... that
// caused the event". A hedged call's breaker opens at its first copy's
// failure, on the copy's goroutine (README Hedging: "A hedged copy runs on
// a goroutine of its own"). A test's observer calling t.FailNow
// (runtime.Goexit) there ends the copy's goroutine, not the call's: the
// copy's answer never reaches the hedge, which waits for it until the
// caller's context ends (here cancelled after 1 s; without it, forever).
// Want: the call ends (its goroutine, or its return) at once, as it does
// unhedged.
func TestAttack27GGoexitInAnObserverOnAHedgedCopyHoldsTheCall(t *testing.T) {
	atkNoLeak(t)
	exits := &atk27gSink{act: goruntime.Goexit}
	c := atk27gHedgedOpener(t, 1, 20*time.Millisecond, nil, exits.observe)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var returned atomic.Bool
	var callErr error
	start := time.Now()
	go func() {
		defer close(done)
		_, callErr = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		returned.Store(true)
	}()
	held := false
	select {
	case <-done:
	case <-time.After(time.Second):
		held = true
		cancel()
		<-done
	}
	took := time.Since(start)
	if exits.opened.Load() != 1 {
		t.Fatalf("the observer saw %d openings, want 1", exits.opened.Load())
	}
	if held {
		t.Errorf("README Logs and events: the observer runs on the goroutine of the call that caused the event. Its "+
			"runtime.Goexit at the breaker's opening (a hedged copy's failure) ended the copy's goroutine, and the call was "+
			"still waiting for that copy's answer after 1 s (cancelled then: returned=%v %v after %v); unhedged, the call's "+
			"goroutine ends at once", returned.Load(), callErr, took.Round(time.Millisecond))
	}
}

// TestAttack27GHedgedCopiesEventsOncePerSink: events raised on the hedged
// copies' goroutines (the breaker opened by copies failing at once on 8
// concurrent calls) are reported once to the logger and to each observer:
// the opening once, never once per copy nor per call.
func TestAttack27GHedgedCopiesEventsOncePerSink(t *testing.T) {
	atkNoLeak(t)
	log := &attack25aLog{}
	a, b := &atk27gSink{}, &atk27gSink{}
	var mu sync.Mutex
	kinds := map[runtime.EventKind]int{}
	all := func(e runtime.Event) {
		mu.Lock()
		kinds[e.Kind]++
		mu.Unlock()
	}
	c := atk27gHedgedOpener(t, 4, time.Millisecond, log, a.observe, all, b.observe)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		})
	}
	wg.Wait()
	if s, _ := c.Runtime().BreakerState(atkGetStock); s != runtime.StateOpen {
		t.Fatalf("breaker %v after 8 hedged calls failing UNAVAILABLE, want open", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if n, m, l := a.opened.Load(), b.opened.Load(), atk27gLogged(log); n != 1 || m != 1 || l != 1 ||
		kinds[runtime.EventBreakerTransition] != 1 {
		t.Errorf("the breaker opened once, on a hedged copy's goroutine; the observers saw it %d and %d times, the logger %d, "+
			"and an observer of every event saw %v: want once each", n, m, l, kinds)
	}
}

// atk27gChild runs the test named in a child process of this test binary
// with ATTACK27G_CHILD=which, and returns its output and exit error.
func atk27gChild(t *testing.T, test, which string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), "ATTACK27G_CHILD="+which)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child did not end in 60 s (a deadlock):\n%s", out)
	}
	return string(out), err
}

// TestAttack27GObserverPanicAtAnUnreadStreamsEndEndsTheProgram: README,
// Logs and events: "a stream whose context ends while none of its calls is
// in progress is ended on a goroutine of the runtime, where a panic ends
// the program". A WatchStock stream nobody reads, its 250 ms timeout
// opening the breaker; the logger and a second observer, after the one
// that panics there. The program (a child process) must end with that
// panic, neither deadlocking nor going on with it swallowed, and the
// logger and the second observer must have been given the event first.
func TestAttack27GObserverPanicAtAnUnreadStreamsEndEndsTheProgram(t *testing.T) {
	if os.Getenv("ATTACK27G_CHILD") == "unread-stream" {
		atk27gChildUnreadStream(t)
		return
	}
	start := time.Now()
	out, err := atk27gChild(t, "TestAttack27GObserverPanicAtAnUnreadStreamsEndEndsTheProgram", "unread-stream")
	took := time.Since(start)
	for _, want := range []string{`msg="circuit breaker open"`, "ATTACK27G: the second observer saw the opening",
		"panic: attack27g: observer panics at the stream's end"} {
		if !strings.Contains(out, want) {
			t.Errorf("the child's output lacks %q", want)
		}
	}
	if err == nil || strings.Contains(out, "ATTACK27G: the program went on") {
		t.Errorf("the observer's panic on the runtime's goroutine did not end the program (exit %v, after %v)", err, took)
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

func atk27gChildUnreadStream(t *testing.T) {
	srv, err := faultserver.Start(server.Hang, runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cc := dialFault(t, srv.Addr())
	c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{
			runtime.WithLogger(slog.New(slog.NewTextHandler(os.Stdout, nil))),
			runtime.WithObserver(func(e runtime.Event) {
				if atk27gOpened(e) {
					panic("attack27g: observer panics at the stream's end")
				}
			}),
			runtime.WithObserver(func(e runtime.Event) {
				if atk27gOpened(e) {
					fmt.Println("ATTACK27G: the second observer saw the opening")
				}
			}),
		},
	}, func(p *policy.Service) {
		p.Breaker.MinimumCalls = 1
		atkMethod(p, atkWatchStock).Timeout = 250 * time.Millisecond
	})
	if _, err := c.WatchStock(context.Background(), &inventoryv1.WatchStockRequest{Sku: "apple"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // nobody reads: the runtime ends the stream at 250 ms
	fmt.Println("ATTACK27G: the program went on")
}

// atk27gDeadlineRounds is how many hedged calls the child makes, each on a
// client of its own; atk27gDeadlineJudged how many of them, at least, must
// have sent their second copy (a round that did not, on a loaded machine,
// says nothing and is not judged).
const (
	atk27gDeadlineRounds = 10
	atk27gDeadlineJudged = 7
)

// TestAttack27GObserverPanicAtADeadlineCutCopyReachesTheCaller: README,
// Hedging: copies in flight at the deadline "are left to that deadline to
// end, not cancelled as losers", so the breaker counts them as failures;
// Logs and events: an observer's panic "goes on to that caller, from the
// call". A hedged call (2 copies, 10 ms apart) on a hung server, its 80 ms
// deadline ending both: the second copy's failure opens the breaker
// (minimum_calls 2) on that copy's goroutine, and the observer panics. The
// call is still waiting for its copies then (it returns once every copy has
// ended), so the panic has a caller to reach; a child process makes 10
// such calls, each on a client of its own. A round whose second copy was
// not sent (a loaded machine) says nothing and is not judged: every round
// judged must have got the panic, and at least 7 must be judged (before,
// the check wanted "10 of 10", and 9 rounds judged, all with the panic,
// failed it). Before, the copy handed the
// panic over only if the hedge was still reading its copies' answers: once
// it had its answer and waited for the copies to end, the copy panicked on
// its own goroutine and the program died. Now the call panics with it once
// every copy has ended.
func TestAttack27GObserverPanicAtADeadlineCutCopyReachesTheCaller(t *testing.T) {
	if os.Getenv("ATTACK27G_CHILD") == "deadline-copy" {
		atk27gChildDeadlineCopy(t)
		return
	}
	out, err := atk27gChild(t, "TestAttack27GObserverPanicAtADeadlineCutCopyReachesTheCaller", "deadline-copy")
	done := strings.Contains(out, "ATTACK27G: rounds done")
	caught, judged, counted := atk27gCaught(out)
	rounds := strings.Count(out, "ATTACK27G: round ")
	switch {
	case err != nil || !done || !counted || caught != judged:
		t.Errorf("README Logs and events: an observer's panic goes on to the caller, from the call. Hedged calls whose two "+
			"copies the caller's deadline ended (failures, not losers), the second opening the breaker and the observer "+
			"panicking there: the child died or a caller missed the panic (exit %v, %d rounds reported, all done: %v, "+
			"the panic got in %d of the %d rounds that sent both copies; the panic on the copy's own goroutine ends "+
			"the program):\n%s", err, rounds, done, caught, judged, atk27gTail(out, 40))
	case judged < atk27gDeadlineJudged:
		t.Errorf("only %d of the child's %d rounds sent their second copy (want %d at least: a machine so loaded that the "+
			"test judges too little); each of those got the observer's panic:\n%s",
			judged, atk27gDeadlineRounds, atk27gDeadlineJudged, atk27gTail(out, 40))
	}
}

// atk27gCaught reads the child's last line, "got the observer's panic in
// caught of judged" (counted: the line was there).
func atk27gCaught(out string) (caught, judged int, counted bool) {
	const prefix = "ATTACK27G: got the observer's panic in "
	i := strings.LastIndex(out, prefix)
	if i < 0 {
		return 0, 0, false
	}
	_, err := fmt.Sscanf(out[i+len(prefix):], "%d of %d", &caught, &judged)
	return caught, judged, err == nil
}

func atk27gTail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func atk27gChildDeadlineCopy(t *testing.T) {
	fs, err := faultserver.Start(server.Hang, runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Stop()
	cc := dialFault(t, fs.Addr())
	readyConn(t, cc)
	caught, judged := 0, 0
	for i := range atk27gDeadlineRounds {
		before := fs.Calls(atkGetStock)
		c := atkInventory(t, cc, inventoryv1.InventoryServiceResilientOptions{Runtime: []runtime.Option{
			runtime.WithClock(newAtkClock()), runtime.WithRegisterer(prometheus.NewRegistry()),
			runtime.WithObserver(func(e runtime.Event) {
				if atk27gOpened(e) {
					panic("attack27g: observer panics at open")
				}
			})}}, func(p *policy.Service) {
			p.Bulkhead, p.AdaptiveLimit, p.ClientThrottle = nil, nil, nil
			p.Breaker = &policy.Breaker{FailureRatio: 0.5, MinimumCalls: 2, Window: time.Minute, CoolDown: time.Minute,
				HalfOpenProbes: 1, FailureCodes: policy.CodesOf(codes.Unavailable, codes.DeadlineExceeded)}
			p.Budget = &policy.Budget{Ratio: 1, MinRetries: 1000, Window: time.Minute}
			m := atkMethod(p, atkGetStock)
			m.Retry, m.Timeout, m.OverallTimeout = nil, 0, 0
			atk27bHedged(m, 10*time.Millisecond)
		})
		var err error
		p := r18Panicked(func() { err = atk27bGet(c, 80*time.Millisecond) })
		n := fs.Calls(atkGetStock) - before
		fmt.Printf("ATTACK27G: round %d: %d copies, error %v, panic %v\n", i, n, err, p)
		if n != 2 {
			continue // a loaded machine: the second copy not sent
		}
		judged++
		if p != nil && strings.Contains(fmt.Sprint(p), "attack27g: observer panics at open") {
			caught++
		}
	}
	fmt.Println("ATTACK27G: rounds done")
	fmt.Printf("ATTACK27G: got the observer's panic in %d of %d\n", caught, judged)
}
