package window

import (
	"testing"
	"time"

	"github.com/go-resilient/resilient/runtime/internal/fuzzprog"
)

// countModel is the obviously correct count window: a slice of every
// outcome since the last reset, of which the last n are summed.
type countModel struct {
	n        int
	outcomes []bool // true: failure
}

func (m *countModel) add(da, db uint64) {
	for i := range da {
		m.outcomes = append(m.outcomes, i < db)
	}
}

func (m *countModel) sum() (o, f uint64) {
	last := m.outcomes[max(0, len(m.outcomes)-m.n):]
	for _, failure := range last {
		o++
		if failure {
			f++
		}
	}
	return o, f
}

// FuzzCount checks Count against countModel on any sequence of adds, sums
// and resets.
func FuzzCount(f *testing.F) {
	f.Add([]byte{3, 0, 1, 0, 1, 1, 0, 1, 0, 2, 0, 1, 1, 0, 1})
	f.Add([]byte{0, 1, 7, 3, 0, 1, 1, 2, 0, 1, 9, 9})
	f.Add([]byte{9, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 2, 0, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		n := int(prog.Next()%16) + 1
		c := mustCount(t, n)
		m := &countModel{n: n}
		for step := 0; !prog.Done() && step < 4096; step++ {
			switch prog.Next() % 3 {
			case 0, 1:
				da, db := uint64(prog.Next()%4), uint64(prog.Next()%5)
				if da == 0 {
					da = 1
				}
				c.Add(int64(step), da, db)
				m.add(da, db)
			case 2:
				c.Reset()
				m.outcomes = m.outcomes[:0]
			}
			o, f := c.Sum(0)
			wo, wf := m.sum()
			if o != wo || f != wf {
				t.Fatalf("step %d (n %d): Sum = (%d, %d), model says (%d, %d)", step, n, o, f, wo, wf)
			}
		}
	})
}

// timeModel is the obviously correct time window: every add with its
// bucket number, summed when its bucket is one of the last Buckets.
type timeModel struct {
	width  int64
	events []struct{ q, a, b uint64 }
}

func (m *timeModel) sum(now int64) (a, b uint64) {
	cur := uint64(max(now, 0) / m.width)
	per := map[uint64][2]uint64{}
	for _, e := range m.events {
		if e.q <= cur && cur-e.q < Buckets {
			v := per[e.q]
			if e.a <= MaxBucketCount-v[0] && e.b <= MaxBucketCount-v[1] {
				v[0], v[1] = v[0]+e.a, v[1]+e.b // a fuller bucket drops the add whole
			}
			per[e.q] = v
		}
	}
	for _, v := range per {
		a += v[0]
		b += v[1]
	}
	return a, b
}

// FuzzTime checks Time against timeModel on any sequence of adds, sums,
// resets and steps of the clock forward.
func FuzzTime(f *testing.F) {
	f.Add([]byte{9, 0, 1, 2, 1, 30, 0, 3, 0, 2, 5, 1, 200, 0, 1, 1})
	f.Add([]byte{0, 0, 9, 9, 1, 255, 1, 255, 0, 4, 4, 2, 0, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		prog := fuzzprog.New(data)
		d := time.Duration(prog.Next()%50+1) * 10 * time.Millisecond
		w := NewTime(d)
		m := &timeModel{width: max(int64(d)/Buckets, 1)}
		var now int64
		for step := 0; !prog.Done() && step < 4096; step++ {
			switch prog.Next() % 4 {
			case 0, 3:
				da, db := uint64(prog.Next()), uint64(prog.Next())
				w.Add(now, da, db)
				m.events = append(m.events, struct{ q, a, b uint64 }{uint64(now / m.width), da, db})
			case 1:
				now += int64(prog.Next()) * int64(time.Millisecond)
			case 2:
				w.Reset()
				m.events = m.events[:0]
			}
			a, b := w.Sum(now)
			wa, wb := m.sum(now)
			if a != wa || b != wb {
				t.Fatalf("step %d at %v: Sum = (%d, %d), model says (%d, %d)", step, time.Duration(now), a, b, wa, wb)
			}
		}
	})
}
