package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// StoreTimeout bounds each operation on the idempotency store: a claim
// gets the least of StoreTimeout and a quarter of the time the request has
// left, so that OnStoreError still leaves the handler three quarters of
// it (the polls of a request waiting for another with its key, which
// never runs without dedup, the least of StoreTimeout and the time left);
// renewing gets the least of StoreTimeout, half the lease and the time
// left on it; completing the least of StoreTimeout and the time left on
// the lease, but at least StoreTimeout/10. A store that does not answer
// within it (silent, paused, partitioned) counts as unreachable. The
// Guard stops waiting at the bound even if the store ignores its context
// (a go-redis client without ContextTimeoutEnabled does).
const StoreTimeout = 500 * time.Millisecond

// errStoreTimeout is the error of an operation the store did not answer
// in time.
var errStoreTimeout = errors.New("did not answer in time")

// claimTimeout is the bound of a claim made with ctx.
func claimTimeout(ctx context.Context) time.Duration { return leftBound(ctx, 4) }

// pollTimeout is the bound of a claim made with ctx by a request waiting
// for another with the same key: StoreTimeout, or the time left.
func pollTimeout(ctx context.Context) time.Duration { return leftBound(ctx, 1) }

// leftBound is the least of StoreTimeout and 1/share of the time ctx has
// left, but at least a millisecond.
func leftBound(ctx context.Context, share time.Duration) time.Duration {
	d := StoreTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/share)
	}
	return max(d, time.Millisecond)
}

// bounded runs op with a context bounded by d and returns its result, or
// errStoreTimeout once d has passed, whichever comes first. An op still
// running then finishes in its goroutine, and late (if not nil) receives
// what it returned: a claim that succeeded after the Guard stopped
// waiting is released there. With inline (a store that never blocks, the
// MemoryStore), op runs on the caller's goroutine.
func bounded[T any](ctx context.Context, inline bool, d time.Duration, op func(context.Context) (T, error), late func(T, error)) (T, error) {
	if inline {
		return op(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	type result struct {
		v   T
		err error
	}
	const (
		waiting = iota
		delivered
		abandoned
	)
	var state atomic.Int32
	ch := make(chan result, 1)
	go func() {
		defer cancel()
		v, err := op(ctx)
		if state.CompareAndSwap(waiting, delivered) {
			ch <- result{v, err}
			return
		}
		if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(waiting, abandoned) {
			var zero T
			return zero, fmt.Errorf("%w within %s", errStoreTimeout, d)
		}
		r := <-ch
		return r.v, r.err
	}
}

// storeHealth tracks the episodes of store failures so that each is logged
// once: at its first failure, and when the store answers again.
type storeHealth struct {
	failing atomic.Bool
}

// storeError counts a failed store operation and logs the first of an
// episode.
func (g *Guard) storeError(m *method, op string, err error) {
	m.svc.storeErrors.Add(1)
	if g.health.failing.CompareAndSwap(false, true) && g.logger != nil {
		g.logger.LogAttrs(context.Background(), slog.LevelWarn, "idempotency store failing; each method applies its OnStoreError until it answers again",
			slog.String("method", m.name), slog.String("op", op), slog.String("error", err.Error()))
	}
}

// storeOK ends an episode of failures.
func (g *Guard) storeOK() {
	if g.health.failing.Load() && g.health.failing.CompareAndSwap(true, false) && g.logger != nil {
		g.logger.LogAttrs(context.Background(), slog.LevelInfo, "idempotency store answering again")
	}
}
