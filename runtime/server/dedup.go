package server

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime"
)

// ReplayedHeader is the trailer, with the value "true", of an answer that
// was not computed for this request but replayed from the store: the
// outcome of an earlier request with the same idempotency key.
const ReplayedHeader = "resilient-replayed"

// Waiting for a running request with the same key: the store is polled
// with doubling, jittered pauses between these bounds, until the first
// request's outcome is there or the waiter's own deadline ends.
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 100 * time.Millisecond
)

// storeWriteTimeout bounds writing an outcome, which is done even when the
// caller has gone: a repeat should find it.
const storeWriteTimeout = 2 * time.Second

// dedupConfig is a DedupPolicy with its defaults applied.
type dedupConfig struct {
	header string
	ttl    time.Duration
	lease  time.Duration
	onErr  StoreErrorMode
	final  runtime.CodeSet
	newMsg func() proto.Message
}

func newDedupConfig(m *MethodPolicy) *dedupConfig {
	d := m.Dedup
	c := &dedupConfig{header: d.Header, ttl: d.TTL, lease: d.Lease, onErr: d.OnStoreError, final: d.FinalCodes, newMsg: m.NewResponse}
	if c.header == "" {
		c.header = runtime.IdempotencyKeyHeader
	}
	if c.lease == 0 {
		c.lease = DefaultLease
	}
	if c.final == 0 {
		c.final = DefaultFinalCodes
	}
	return c
}

// dedup runs the request unless a request with the same key ran or runs.
func (g *Guard) dedup(ctx context.Context, m *method, req any, handler grpc.UnaryHandler) (any, error) {
	d := m.dedup
	md, _ := metadata.FromIncomingContext(ctx)
	var key string
	if v := md.Get(d.header); len(v) > 0 {
		key = v[0]
	}
	if key == "" {
		return handler(ctx, req) // no key, nothing to deduplicate on
	}
	// Full method names hold no ':', so the method scopes the key.
	skey := m.name + ":" + key
	token := newToken()
	pause := pollFirst
	for waited := false; ; {
		c, err := g.store.Claim(ctx, skey, token, d.lease)
		if err != nil {
			return g.storeFailed(ctx, m, req, handler, err)
		}
		switch c.State {
		case Claimed:
			return g.runOwned(ctx, m, skey, token, req, handler)
		case Done:
			m.svc.replayed.Add(1)
			return replay(ctx, m, c.Outcome)
		}
		if !waited {
			waited = true
			m.svc.waited.Add(1)
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(),
				"resilient: %s: a request with the same idempotency key is still running; stopped waiting for it: %v", m.name, ctx.Err())
		}
		pause = min(2*pause, pollMax)
	}
}

// runOwned runs the request whose key this request claimed, renewing the
// lease meanwhile, and keeps its outcome when it is final.
func (g *Guard) runOwned(ctx context.Context, m *method, skey, token string, req any, handler grpc.UnaryHandler) (resp any, err error) {
	d := m.dedup
	bg := context.WithoutCancel(ctx)
	stopRenewing := g.renew(bg, m, skey, token)
	kept := false
	defer func() {
		stopRenewing()
		if kept {
			return
		}
		// A transient failure, an outcome that could not be kept, or a
		// panic: free the key so that a repeat runs again.
		rctx, cancel := context.WithTimeout(bg, storeWriteTimeout)
		defer cancel()
		if rerr := g.store.Release(rctx, skey, token); rerr != nil {
			g.storeError(m, "release", rerr)
		}
	}()
	resp, err = handler(ctx, req)
	var o Outcome
	switch {
	case err == nil:
		msg, ok := resp.(proto.Message)
		if !ok {
			return resp, err
		}
		b, merr := proto.Marshal(msg)
		if merr != nil {
			g.storeError(m, "marshal", merr)
			return resp, err
		}
		o.Response = b
	case d.final.Has(status.Code(err)):
		o.Status = status.Convert(err).Proto()
	default:
		return resp, err
	}
	wctx, cancel := context.WithTimeout(bg, storeWriteTimeout)
	defer cancel()
	if werr := g.store.Complete(wctx, skey, token, o, d.ttl); werr != nil {
		g.storeError(m, "complete", werr)
		return resp, err
	}
	kept = true
	return resp, err
}

// renew extends the lease every third of it until the returned function is
// called (which waits for the renewing goroutine to end).
func (g *Guard) renew(ctx context.Context, m *method, skey, token string) (stop func()) {
	lease := m.dedup.lease
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(ctx, lease/3)
			err := g.store.Renew(rctx, skey, token, lease)
			cancel()
			if errors.Is(err, ErrNotOwner) {
				g.storeError(m, "renew", err)
				return
			}
			if err != nil {
				g.storeError(m, "renew", err)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// replay answers with a kept outcome.
func replay(ctx context.Context, m *method, o Outcome) (any, error) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ReplayedHeader, "true"))
	if o.Status != nil {
		return nil, status.ErrorProto(o.Status)
	}
	msg := m.dedup.newMsg()
	if err := proto.Unmarshal(o.Response, msg); err != nil {
		return nil, status.Errorf(codes.Internal, "resilient: %s: the kept response does not decode as %s: %v",
			m.name, msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return msg, nil
}

// storeFailed applies the method's OnStoreError when the store could not
// say whether the key is free.
func (g *Guard) storeFailed(ctx context.Context, m *method, req any, handler grpc.UnaryHandler, err error) (any, error) {
	if ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	g.storeError(m, "claim", err)
	if m.dedup.onErr == RunWithoutDedup {
		m.svc.ranWithoutDedup.Add(1)
		return handler(ctx, req)
	}
	return nil, status.Errorf(codes.Unavailable,
		"resilient: %s: the idempotency store cannot be reached, and the method refuses to run without it: %v", m.name, err)
}

func (g *Guard) storeError(m *method, op string, err error) {
	m.svc.storeErrors.Add(1)
	if g.logger != nil {
		g.logger.LogAttrs(context.Background(), slog.LevelWarn, "idempotency store error",
			slog.String("method", m.name), slog.String("op", op), slog.String("error", err.Error()))
	}
}
