package runtime

import (
	"context"
	"testing"
	"time"
)

// BenchmarkOver is what reading the deadline costs at a call's start
// beside its context's Err (over, README: Deadlines): on a context with a
// deadline, one time.Now more; on one without, one Deadline call.
func BenchmarkOver(b *testing.B) {
	withDeadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"deadline", withDeadline}, {"none", context.Background()}} {
		b.Run(c.name+"/Err", func(b *testing.B) {
			for b.Loop() {
				if c.ctx.Err() != nil {
					b.Fatal("over")
				}
			}
		})
		b.Run(c.name+"/over", func(b *testing.B) {
			for b.Loop() {
				if over(c.ctx) != nil {
					b.Fatal("over")
				}
			}
		})
	}
}
