package runtime_test

// Attack on the pooled trailer slots (pushback.go): a slot goes back to
// the pool once its attempt returned. An interceptor that gives up on its
// invoker when the attempt's context ends, and returns before the invoker
// has, leaves gRPC to write the trailer afterwards: the trailer option is
// applied when the invoker's call finishes. Into a slot reused meanwhile by
// another call, that late write would replace the other call's trailer,
// and its "do not retry" with it (and race with its read).

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/status"
)

func TestAttackR18DetachingInterceptorLeavesOtherCallsTrailersAlone(t *testing.T) {
	// How the interceptor says it gave up: a status of the context's code,
	// or the context's bare error (a status of UNKNOWN to status.Code,
	// which the slot's check missed: the slot went back to the pool while
	// gRPC could still write into it), or wrapped. The rig is
	// atk29dDetaching's (attack29d_detached_test.go).
	for _, c := range []struct {
		name   string
		giveUp func(context.Context) error
	}{
		{"status", func(ctx context.Context) error { return status.FromContextError(ctx.Err()).Err() }},
		{"bare context error", func(ctx context.Context) error { return ctx.Err() }},
		{"wrapped context error", func(ctx context.Context) error { return fmt.Errorf("gave up: %w", ctx.Err()) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkNoLeak(t)
			r := atk29dDetaching(t, c.giveUp)
			if r.detached == 0 {
				t.Fatal("the interceptor gave up on no invoker: the test proves nothing")
			}
			if r.toldOff == 0 {
				t.Fatal("no attempt came back with the server's do-not-retry: the test proves nothing")
			}
			if r.answered > 0 {
				t.Errorf("%d calls answered; every attempt fails", r.answered)
			}
			if r.repeated > 0 {
				t.Errorf("%d attempts after the server said do not retry (calls %v): their trailer was overwritten by another call's late write",
					r.repeated, r.example)
			}
		})
	}
}
