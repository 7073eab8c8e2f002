package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/internal/throttle"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
	"github.com/go-resilient/resilient/runtime/policy"
)

// FuzzAdaptiveLayers drives a client with an adaptive limit and a
// client-side throttler through calls that end in every way (an answer,
// NOT_FOUND, each overload code, the caller cancelling, a panic), some of
// them held in flight while others are made. The throttler is checked
// against a reference model of the README's formula, fed what the README
// says each ending counts as, with the random draws taken from the input;
// the limit against what it promises: an attempt is refused exactly when
// as many are in flight as the limit allows, every token comes back, and
// the limit stays within its bounds. A refused attempt never reaches the
// dependency.
func FuzzAdaptiveLayers(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 2, 0, 2, 9, 2, 0, 0, 0, 1, 3, 0, 7, 0})
	f.Add([]byte{3, 1, 7, 0, 7, 1, 7, 2, 8, 2, 8, 0, 0, 4, 0, 5, 2, 6, 3})
	f.Add([]byte{0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 1, 0, 1, 0})
	f.Add([]byte{2, 0, 7, 5, 7, 6, 8, 4, 8, 1, 3, 200, 2, 10, 0, 250})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		k := float64(prog.Next()%3) + 1
		const maxLimit = 4
		sp := policy.Service{Name: "fuzz.Adaptive",
			AdaptiveLimit:  &policy.AdaptiveLimit{InitialLimit: int(prog.Next()%maxLimit) + 1, MaxLimit: maxLimit},
			ClientThrottle: &policy.Throttle{K: k, Window: time.Hour, MaxRefusal: 0.9},
			// The limit needs a per-attempt timeout to halve on; an hour never
			// passes in the run.
			Methods: []policy.Method{{Name: "/fuzz.Adaptive/Get", Idempotent: true, Timeout: time.Hour}}}
		clock := &fuzzClock{base: time.Unix(1_000_000, 0)}
		c, err := NewClient(&sp, WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		var draw float64 // the throttler's next random draw, from the program
		th := c.Method(0).throttle
		if th.t, err = throttle.New(throttle.Policy(*sp.ClientThrottle), c.base, func() float64 { return draw }); err != nil {
			t.Fatal(err)
		}
		l := c.Method(0).concurrency.l

		// The throttler's model: requests and accepts over a window that
		// never forgets (an hour; the run lasts seconds of fake time).
		var requests, accepts float64
		refusal := func() float64 {
			p := (requests - k*accepts) / (requests + 1)
			if !(p > 0) {
				return 0
			}
			return min(p, 0.9)
		}
		record := func(o byte) { // o: the ending, as below
			switch o {
			case 0, 1: // an answer
				requests++
				accepts++
			case 2, 3, 4: // an overload code
				requests++
			}
		}
		ending := func(ctx context.Context, cancel context.CancelFunc, o byte) error {
			switch o {
			case 0:
				return nil
			case 1:
				return status.Error(codes.NotFound, "no")
			case 2:
				return status.Error(codes.Unavailable, "down")
			case 3:
				return status.Error(codes.DeadlineExceeded, "slow below")
			case 4:
				return status.Error(codes.ResourceExhausted, "overloaded")
			case 5:
				cancel()
				return status.FromContextError(ctx.Err()).Err()
			}
			panic("the call panicked")
		}
		var holding []held
		// finish ends the held call i with the outcome the program gives,
		// waits for it, and feeds the model.
		finish := func(i int) {
			h := holding[i]
			o := prog.Next() % 7
			h.outcome <- o
			<-h.done
			record(o)
			holding = append(holding[:i], holding[i+1:]...)
		}
		calls := 0 // that reached the dependency
		admit := func(hold bool) {
			p := refusal()
			draw = float64(prog.Next()) / 256
			wantThrottled := p > 0 && draw < p
			wantLimited := !wantThrottled && len(holding) >= l.Limit()
			ctx, cancel := context.WithCancel(context.Background())
			entered := make(chan struct{}, 1)
			h := held{outcome: make(chan byte, 1), done: make(chan error, 1)}
			s := &scripted{answer: func(context.Context, int64) error {
				entered <- struct{}{}
				o := <-h.outcome
				clock.n.Add(int64(time.Millisecond) * int64(o+1))
				return ending(ctx, cancel, o)
			}}
			go func() {
				defer cancel()
				defer func() {
					if r := recover(); r != nil {
						h.done <- errPanicked
					}
				}()
				h.done <- adCall(ctx, c, s, nil)
			}()
			if wantThrottled || wantLimited {
				var err error
				select {
				case err = <-h.done:
				case <-entered:
					h.outcome <- 0
					<-h.done
					t.Fatalf("refusal probability %v, draw %v, %d in flight under %d: sent, want it refused", p, draw, len(holding), l.Limit())
				}
				if wantThrottled && (!errors.Is(err, ErrThrottled) || status.Code(err) != codes.Unavailable) {
					t.Fatalf("refusal probability %v, draw %v: got %v, want ErrThrottled", p, draw, err)
				}
				if wantLimited && !errors.Is(err, ErrConcurrencyLimited) {
					t.Fatalf("%d in flight under a limit of %d: got %v, want ErrConcurrencyLimited", len(holding), l.Limit(), err)
				}
				if s.calls.Load() != 0 {
					t.Fatal("a refused attempt reached the dependency")
				}
				if wantThrottled {
					requests++
				}
				return
			}
			select {
			case <-entered:
			case err := <-h.done:
				t.Fatalf("refusal probability %v, draw %v, %d in flight under %d: refused with %v, want it sent", p, draw, len(holding), l.Limit(), err)
			}
			calls++
			holding = append(holding, h)
			if !hold {
				finish(len(holding) - 1)
			}
		}
		for !prog.Done() {
			switch op := prog.Next() % 10; {
			case op < 5:
				admit(false)
			case op < 7:
				admit(true)
			case op < 9 && len(holding) > 0:
				finish(int(prog.Next()) % len(holding))
			default:
				clock.n.Add(int64(prog.Next()) * int64(time.Millisecond))
			}
			if l.InFlight() != len(holding) || l.Limit() < 1 || l.Limit() > maxLimit {
				t.Fatalf("in flight %d with %d held, limit %d of [1, %d]", l.InFlight(), len(holding), l.Limit(), maxLimit)
			}
			if got, want := th.t.RefusalProbability(clock.Now()), refusal(); got != want {
				t.Fatalf("refusal probability %v, model %v (requests %v, accepts %v)", got, want, requests, accepts)
			}
		}
		for len(holding) > 0 {
			finish(0)
		}
		if l.InFlight() != 0 {
			t.Fatalf("%d tokens still held after every call ended", l.InFlight())
		}
	})
}

// held is a call in flight in the dependency, waiting for its ending.
type held struct {
	outcome chan byte
	done    chan error
}
