package throttle

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
)

// model is the obviously correct throttler: a list of every counted
// request with its bucket, summed over the last ten buckets, and the
// formula of the SRE book.
type model struct {
	p      Policy
	width  int64
	events []struct {
		q        int64
		accepted bool
	}
}

func (m *model) count(n int64, accepted bool) {
	m.events = append(m.events, struct {
		q        int64
		accepted bool
	}{n / m.width, accepted})
}

func (m *model) refusal(n int64) float64 {
	cur := n / m.width
	var requests, accepts float64
	for _, e := range m.events {
		if e.q <= cur && cur-e.q < 10 {
			requests++
			if e.accepted {
				accepts++
			}
		}
	}
	p := (requests - m.p.K*accepts) / (requests + 1)
	if p <= 0 {
		return 0
	}
	return min(p, m.p.MaxRefusal)
}

// FuzzThrottler checks Throttler against model on any sequence of allowed
// and refused requests, accepts, refusals and steps of the clock, with the
// random draws taken from the input.
func FuzzThrottler(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 0, 2, 0, 0, 100, 0, 200, 1, 1, 3, 50, 0, 1, 0, 2})
	f.Add([]byte{9, 4, 9, 2, 2, 2, 2, 2, 2, 0, 255, 0, 10, 1, 1, 1, 1, 3, 255, 0, 0})
	f.Add([]byte{3, 1, 3, 2, 2, 2, 0, 128, 3, 20, 0, 0, 1, 1, 1, 0, 64, 3, 200, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		p := Policy{
			K:          1 + float64(prog.Next()%20)/10,
			Window:     time.Duration(prog.Next()%10+1) * 100 * time.Millisecond,
			MaxRefusal: float64(prog.Next()%9+1) / 10,
		}
		draws, draw := 0, 0.0
		th := mustNew(t, p, func() float64 {
			draws++
			draw = float64(prog.Next()) / 256
			return draw
		})
		m := &model{p: p, width: int64(p.Window) / 10}
		var n int64
		for step := 0; !prog.Done() && step < 2048; step++ {
			now := base.Add(time.Duration(n))
			switch prog.Next() % 4 {
			case 0: // a request asks to go
				want := m.refusal(n)
				before := draws
				got := th.Allow(now)
				switch {
				case want == 0 && (draws != before || !got):
					t.Fatalf("step %d: p = 0 but Allow drew %d and said %v", step, draws-before, got)
				case want > 0 && draws != before+1:
					t.Fatalf("step %d: p = %v but Allow drew %d times", step, want, draws-before)
				case want > 0 && got != (draw >= want):
					t.Fatalf("step %d: p = %v, draw %v, Allow said %v", step, want, draw, got)
				}
				if !got {
					m.count(n, false)
				}
			case 1: // an accept
				th.Record(now, true)
				m.count(n, true)
			case 2: // a refusal by the dependency
				th.Record(now, false)
				m.count(n, false)
			case 3:
				n += int64(prog.Next()) * int64(10*time.Millisecond)
			}
			if got, want := th.RefusalProbability(base.Add(time.Duration(n))), m.refusal(n); got != want {
				t.Fatalf("step %d: RefusalProbability = %v, model says %v", step, got, want)
			}
		}
	})
}
