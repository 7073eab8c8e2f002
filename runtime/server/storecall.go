package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// StoreTimeout bounds each operation on the idempotency store: a claim
// gets StoreTimeout, and the request waits for it until then or until the
// request ends (its deadline, its caller's cancellation), which answers
// DEADLINE_EXCEEDED or CANCELLED and is not the store's failure (the
// claim's own outcome within StoreTimeout is counted when it comes); under
// StoreErrorRunWithoutDedup a first claim is waited for the least of
// StoreTimeout and a quarter of the time the request has left, so that
// running without dedup still leaves the handler three quarters of it;
// renewing gets the least of StoreTimeout, half the lease and the time
// left on it (so a claim answered no faster than the least of the first
// two is the store failing: renewBound); completing the least of StoreTimeout and the time left
// before the entry lapses, but at least StoreTimeout/10. A store that does not answer
// within it (silent, paused, partitioned) counts as unreachable. The
// Guard stops waiting at the bound even if the store ignores its context
// (a go-redis client without ContextTimeoutEnabled does).
const StoreTimeout = 500 * time.Millisecond

// errStoreTimeout is the error of an operation the store did not answer
// in time.
var errStoreTimeout = errors.New("did not answer in time")

// errRequestEnded is the error of a store operation whose request ended
// (its deadline, its caller's cancellation) before the store answered: the
// request's end, not the store's failure.
var errRequestEnded = errors.New("the request ended before the idempotency store answered")

// storePanic is the error of a store operation that panicked: the Guard
// recovers it (a Store's call runs on a goroutine of the Guard's, where a
// panic would end the process) and the request goes on as after a failed
// operation. Value is what the store panicked with, Stack where.
type storePanic struct {
	value any
	stack []byte
}

func (p *storePanic) Error() string { return fmt.Sprintf("the store panicked: %v", p.value) }

// recovering runs op, and returns a panic of it as a *storePanic error.
func recovering[T any](ctx context.Context, op func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, &storePanic{value: r, stack: debug.Stack()}
		}
	}()
	return op(ctx)
}

// isPanic reports whether err is that of a store operation that panicked.
func isPanic(err error) bool {
	var p *storePanic
	return errors.As(err, &p)
}

// claimTimeout is how long a first claim made with ctx under
// StoreErrorRunWithoutDedup is waited for, and the bound of releasing a
// claim that failed.
func claimTimeout(ctx context.Context) time.Duration { return leftBound(ctx, 4) }

// leftBound is the least of StoreTimeout and 1/share of the time ctx has
// left, but at least a millisecond.
func leftBound(ctx context.Context, share time.Duration) time.Duration {
	d := StoreTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/share)
	}
	return max(d, time.Millisecond)
}

// bounded runs op, a store operation the Guard makes on its own (not a
// request's claim), with a context bounded by d, and returns its error,
// or errStoreTimeout once d has passed, whichever comes first. An op
// still running then finishes in its goroutine, its result dropped. With
// inline (a store that never blocks, the MemoryStore), op runs on the
// caller's goroutine. A panic of op is returned as a *storePanic error.
func bounded(ctx context.Context, inline bool, d time.Duration, op func(context.Context) error) error {
	_, err := boundedBy(ctx, inline, d, d, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, op(ctx)
	}, nil)
	return err
}

// boundedBy is bounded for a request's store call: op's context is ctx's
// values bounded by d, the store's own bound, but not ended with ctx; the
// Guard waits for it until wait (at most d) has passed (errStoreTimeout)
// or until ctx ends, whichever comes first: then the request, not the
// store, stopped the wait, and the error wraps errRequestEnded and ctx's
// error. late receives what an op still running then returned, and
// whether the request stopped the wait (cut): the caller did not count
// such an op as the store's failure, so late judges it by what the store
// did within d.
func boundedBy[T any](ctx context.Context, inline bool, wait, d time.Duration, op func(context.Context) (T, error), late func(v T, err error, cut bool)) (T, error) {
	if inline {
		return recovering(ctx, op)
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	type result struct {
		v   T
		err error
	}
	const (
		waiting = iota
		delivered
		abandoned
		cut
	)
	var state atomic.Int32
	ch := make(chan result, 1)
	go func() {
		defer cancel()
		v, err := recovering(opCtx, op)
		if state.CompareAndSwap(waiting, delivered) {
			ch <- result{v, err}
			return
		}
		if late != nil {
			defer func() { _ = recover() }()
			late(v, err, state.Load() == cut)
		}
	}()
	var short <-chan time.Time // wait, when shorter than d
	if wait < d {
		t := time.NewTimer(wait)
		defer t.Stop()
		short = t.C
	} else {
		wait = d
	}
	var zero T
	select {
	case r := <-ch:
		return r.v, r.err
	case <-opCtx.Done():
		if state.CompareAndSwap(waiting, abandoned) {
			return zero, fmt.Errorf("%w within %s", errStoreTimeout, d)
		}
	case <-short:
		if state.CompareAndSwap(waiting, abandoned) {
			return zero, fmt.Errorf("%w within %s", errStoreTimeout, wait)
		}
	case <-ctx.Done():
		if state.CompareAndSwap(waiting, cut) {
			return zero, fmt.Errorf("%w: %w", errRequestEnded, ctx.Err())
		}
	}
	r := <-ch
	return r.v, r.err
}

// storeHealth tracks the episodes of store failures so that each is logged
// once: at its first failure, and when the store answers again.
type storeHealth struct {
	failing atomic.Bool
}

// storeError counts a failed store operation and logs the first of an
// episode; a panic is logged every time (storePanicked).
func (g *Guard) storeError(m *method, op string, err error) {
	g.storeErrorLogged(m, op, err, nil)
}

// storeErrorLogged is storeError for an operation retried for one key (a
// lease's renewals): a panic is counted every time but logged only while
// *panicLogged is false, which it then sets, so that a Store whose Renew
// panics logs one stack per lease rather than one per retry (every
// Lease/16 until the lease is given up). A nil panicLogged logs every
// panic.
func (g *Guard) storeErrorLogged(m *method, op string, err error, panicLogged *bool) {
	m.svc.storeErrors.Add(1)
	if isPanic(err) {
		if panicLogged == nil || !*panicLogged {
			g.storePanicked(m, op, err)
			if panicLogged != nil {
				*panicLogged = true
			}
		}
		g.health.failing.Store(true)
		return
	}
	if g.health.failing.CompareAndSwap(false, true) && g.logger != nil {
		g.logger.LogAttrs(context.Background(), slog.LevelWarn, "idempotency store failing; each method applies its OnStoreError until it answers again",
			slog.String("method", m.name), slog.String("op", op), slog.String("error", err.Error()))
	}
}

// storePanicked logs, as an error with its stack, a store operation that
// panicked, each time: a panic is a bug of the Store, not an outage that
// ends, and its stack is what mends it. It reports whether err is one.
func (g *Guard) storePanicked(m *method, op string, err error) bool {
	var p *storePanic
	if !errors.As(err, &p) {
		return false
	}
	if g.logger != nil {
		g.logger.LogAttrs(context.Background(), slog.LevelError, "idempotency store panicked; the Guard recovered it and went on as after a failed operation",
			slog.String("method", m.name), slog.String("op", op), slog.String("panic", fmt.Sprint(p.value)), slog.String("stack", string(p.stack)))
	}
	return true
}

// storeOK ends an episode of failures.
func (g *Guard) storeOK() {
	if g.health.failing.Load() && g.health.failing.CompareAndSwap(true, false) && g.logger != nil {
		g.logger.LogAttrs(context.Background(), slog.LevelInfo, "idempotency store answering again")
	}
}
