package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// ReplayedHeader is the trailer, with the value "true", of an answer that
// was not computed for this request but replayed from the store: the
// outcome of an earlier request with the same idempotency key.
const ReplayedHeader = "resilient-replayed"

// MaxKeyLength is the longest idempotency key, in bytes, that the Guard
// accepts: a longer one is refused with INVALID_ARGUMENT, so that a caller
// cannot make each entry of the store as large as a header may be
// (megabytes). It is Stripe's limit; the generated keys are 26 bytes. The
// client refuses to send a longer one (contract.MaxIdempotencyKeyLength).
const MaxKeyLength = contract.MaxIdempotencyKeyLength

// Waiting for a running request with the same key, or retrying to keep an
// outcome: the store is polled with doubling, jittered pauses between these
// bounds.
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 100 * time.Millisecond
)

// dedupConfig is a policy.Dedup with its defaults applied.
type dedupConfig struct {
	header string
	ttl    time.Duration
	lease  time.Duration
	onErr  policy.StoreErrorMode
	final  policy.CodeSet
	newMsg func() proto.Message
}

func newDedupConfig(m *policy.ServerMethod) *dedupConfig {
	d := m.Dedup
	c := &dedupConfig{header: d.Header, ttl: d.TTL, lease: d.Lease, onErr: d.OnStoreError, final: d.FinalCodes, newMsg: m.NewResponse}
	if c.header == "" {
		c.header = runtime.IdempotencyKeyHeader
	}
	if c.lease == 0 {
		c.lease = policy.DefaultLease
	}
	if c.final == 0 {
		c.final = policy.DefaultFinalCodes
	}
	return c
}

// storeKey is the store's key of an idempotency key sent to method by a
// caller in scope. Full method names hold no ':', and the scope's length
// ends any ambiguity between scope and key.
func storeKey(method, scope, key string) string {
	return method + ":" + strconv.Itoa(len(scope)) + ":" + scope + ":" + key
}

// keyOf returns the values of a request's idempotency key and the header
// they came in: the policy's Header, or, where that is another header and
// the request carries no key there (no value, or one empty value, which
// is no key), runtime.IdempotencyKeyHeader, the one the generated
// clients send, when the request carries that: a generated client's
// retries of a method whose server reads another header are deduplicated
// all the same, never run once for each attempt (an empty Header stamped
// by the caller's middleware beside them included).
func (d *dedupConfig) keyOf(md metadata.MD) (string, []string) {
	v := md.Get(d.header)
	if d.header != runtime.IdempotencyKeyHeader && (len(v) == 0 || len(v) == 1 && v[0] == "") {
		if w := md.Get(runtime.IdempotencyKeyHeader); len(w) != 0 {
			return runtime.IdempotencyKeyHeader, w
		}
	}
	return d.header, v
}

// dedup runs the request unless a request with the same key ran or runs.
func (g *Guard) dedup(ctx context.Context, m *method, req any, handler grpc.UnaryHandler) (any, error) {
	d := m.dedup
	md, _ := metadata.FromIncomingContext(ctx)
	var key string
	header, v := d.keyOf(md)
	switch len(v) {
	case 0:
	case 1:
		key = v[0]
	default:
		// Which value is the key would be a guess: the first may be a
		// caller's key forwarded with the incoming metadata (and then
		// two orders of this caller would share it), or empty (and the
		// request, which its client retries for its other value, would
		// run on every attempt); a proxy matching the header sees them
		// joined, "a,b", as a key.
		return nil, refusef(m.name, codes.InvalidArgument,
			"resilient: %s: the idempotency key header %s was sent more than once (%d values): send one key per request; a client that forwards its incoming metadata must drop its own caller's %s",
			m.name, header, len(v), header)
	}
	if key == "" {
		return handler(ctx, req) // no key, nothing to deduplicate on
	}
	if len(key) > MaxKeyLength {
		return nil, refusef(m.name, codes.InvalidArgument,
			"resilient: %s: the idempotency key (%s header) is %d bytes, longer than the %d the server keeps: send a shorter key (the generated ones are 26 characters)",
			m.name, header, len(key), MaxKeyLength)
	}
	scope, err := g.scopeOf(ctx, m)
	if err != nil {
		return nil, err
	}
	skey := storeKey(m.name, scope, key)
	fp, err := fingerprint(req)
	if err != nil {
		return nil, refusef(m.name, codes.Internal, "resilient: %s: cannot fingerprint the request for its idempotency key: %v", m.name, err)
	}
	token := newToken()
	pause := pollFirst
	for waited := false; ; {
		sent := time.Now()
		wait := StoreTimeout
		if !waited && d.onErr == policy.StoreErrorRunWithoutDedup {
			// Running without dedup after a claim the store did not
			// answer must leave the handler three quarters of the time.
			// A request that refuses to run without the store waits for
			// the store until StoreTimeout or its own end: a store that
			// is merely slower than a quarter of a short request's time
			// is not unreachable, and the request's end is not the
			// store's failure. A waiter never runs without dedup.
			wait = claimTimeout(ctx)
		}
		c, err := g.claim(ctx, m, skey, token, fp, d.lease, wait)
		if err != nil {
			if errors.Is(err, errRequestEnded) {
				// Cut by the request's own deadline or its caller: not
				// the store's failure (claim counts the store's answer,
				// if it fails, when it comes), and the handler did not run.
				return nil, refusef(m.name, status.FromContextError(ctx.Err()).Code(),
					"resilient: %s: %v; the handler did not run", m.name, err)
			}
			if !errors.Is(err, errStoreTimeout) {
				// The store may have carried the claim out and lost its
				// answer (a connection dropped on the way back): free the
				// key, so that the caller's retry does not wait for a
				// request that never ran. An abandoned claim is released
				// by claim itself, when its answer arrives.
				g.forget(ctx, m, skey, token)
			}
			if ctx.Err() != nil {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return g.claimFailed(ctx, m, req, handler, waited,
				"is running, and the idempotency store stopped answering while this one waited for it", err)
		}
		if took := time.Since(sent); c.State == Claimed && took >= renewBound(d.lease) {
			// Answered no faster than a renewal is waited for: at that
			// speed no renewal succeeds, and the keeper would give the
			// key up 5/4 Lease after the claim was sent, cancelling a
			// handler started now for a store that only answers slowly
			// (past the lease, the entry would even lapse under it, and a
			// repeat run alongside). A store that slow cannot hold the
			// lease: it is failing, and OnStoreError decides.
			g.releaseKey(m, skey, token)
			err := fmt.Errorf("it answered the claim after %s, no faster than the %s a renewal of the lease (%s) is waited for: it cannot hold the lease at that speed",
				took.Round(time.Millisecond), renewBound(d.lease), d.lease)
			return g.claimFailed(ctx, m, req, handler, waited,
				"was running, and the idempotency store became too slow to take the key over", err)
		}
		// Not before: a claim answered past the lease is the store failing,
		// and ending an episode for it would log one twice per request.
		g.storeOK()
		if c.State == Pending && holdsClaim(ctx, skey, c.Token) {
			// Another Guard on this server, whose interceptor runs
			// outside this one's, claimed the key in this very store (or
			// one sharing its keys) for this very request, and keeps its
			// outcome: waiting for the claim would wait for the request
			// itself until its deadline. Its outer Guard's store being
			// another (a replica's own), the claim here is this Guard's
			// as for any request, and deduplicates across replicas.
			// Before the fingerprint: an interceptor of the server's own
			// between the two Guards may have changed the request (a
			// normalization), and this request is still the claim's own,
			// not another body under its key (INVALID_ARGUMENT, which the
			// outer Guard would keep and replay to every retry).
			return handler(ctx, req)
		}
		if c.State != Claimed && c.Fingerprint != fp {
			// A refusal of this server's (refuse), not an answer: an outer
			// Guard on another store (a replica's own, this one on the
			// Redis the replicas share) does not keep it, under the other
			// body's fingerprint, for the key's own request's retry to
			// find and be refused for the TTL instead of replayed.
			m.svc.mismatched.Add(1)
			return nil, refuse(m.name, &spb.Status{Code: int32(codes.InvalidArgument), Message: fmt.Sprintf(
				"resilient: %s: the idempotency key %q was already used by a different request (another request body): a key belongs to one request; send a new key with a new request", m.name, key)})
		}
		switch c.State {
		case Claimed:
			// Waiting, or the claim itself, took time: the request must
			// still have what the method needs.
			if err := checkDeadline(ctx, m.name, minDeadlineFor(ctx, m), false); err != nil {
				m.svc.deadlineRefused.Add(1)
				g.release(m, skey, token)
				return nil, err
			}
			return g.runOwned(ctx, m, skey, token, fp, sent, req, handler)
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
			return nil, refusef(m.name, status.FromContextError(ctx.Err()).Code(),
				"resilient: %s: a request with the same idempotency key is still running; stopped waiting for it: %v", m.name, ctx.Err())
		}
		pause = min(2*pause, pollMax)
	}
}

// claimFailed counts a claim the store failed (err) and answers it. A
// waiter saw a request with the key running when last seen, and running
// without dedup would run it twice: it is refused with UNAVAILABLE, its
// message saying what the request with the key was doing (running). Any
// other request is answered as OnStoreError decides.
func (g *Guard) claimFailed(ctx context.Context, m *method, req any, handler grpc.UnaryHandler, waited bool, running string, err error) (any, error) {
	g.storeError(m, "claim", err)
	if waited {
		return nil, refusef(m.name, codes.Unavailable,
			"resilient: %s: a request with the same idempotency key %s: %v", m.name, running, err)
	}
	return g.storeFailed(ctx, m, req, handler, err)
}

// claim is Store.Claim bounded by StoreTimeout, waited for until wait has
// passed or ctx ends (see boundedBy). A claim that succeeds after the
// Guard stopped waiting is released; one the request's end stopped waiting
// for is counted when it comes, as the store's failure if it failed
// (released too, in case the store carried it out) or its answer.
func (g *Guard) claim(ctx context.Context, m *method, key, token string, fp Fingerprint, lease, wait time.Duration) (Claim, error) {
	sent := time.Now()
	return boundedBy(ctx, g.inline, wait, StoreTimeout, func(ctx context.Context) (Claim, error) {
		return g.store.Claim(ctx, key, token, fp, entryLease(lease))
	}, func(c Claim, err error, cut bool) {
		if cut {
			switch took := time.Since(sent); {
			case err != nil:
				g.storeError(m, "claim", err)
			case took > StoreTimeout:
				// A store that ignores its context answered, but later
				// than its bound: silent for all of it.
				g.storeError(m, "claim", fmt.Errorf("%w within %s (it answered after %s)", errStoreTimeout, StoreTimeout, took))
			default:
				g.storeOK()
			}
		} else {
			// The wait ran out and was counted then; a panic the store
			// met afterwards is still logged, with its stack.
			g.storePanicked(m, "claim", err)
		}
		// A claim carried out, or one that failed once nobody waited (the
		// store may have carried it out first, after the request's own
		// release of it): the key is freed, so that a repeat runs.
		if err != nil || c.State == Claimed {
			rctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
			defer cancel()
			_, err := recovering(rctx, func(ctx context.Context) (struct{}, error) {
				return struct{}{}, g.store.Release(ctx, key, token)
			})
			g.storePanicked(m, "release", err)
		}
	})
}

// release frees a key this request holds, bounded by StoreTimeout; the
// store's answer ends an episode of failures.
func (g *Guard) release(m *method, key, token string) {
	if g.releaseKey(m, key, token) == nil {
		g.storeOK()
	}
}

// releaseKey is release without ending an episode: for the key of a claim
// the store failed by answering it too late, whose release, quick or not,
// says nothing of a store that is failing.
func (g *Guard) releaseKey(m *method, key, token string) error {
	err := bounded(context.Background(), g.inline, StoreTimeout, func(ctx context.Context) error {
		return g.store.Release(ctx, key, token)
	})
	if err != nil {
		g.storeError(m, "release", err)
	}
	return err
}

// forget releases a key whose claim failed, in case the store carried it
// out, bounded like a claim (at least StoreTimeout/10, for a request whose
// caller is gone); its failure is not counted (the claim's is), but a
// panic is logged.
func (g *Guard) forget(ctx context.Context, m *method, key, token string) {
	err := bounded(context.WithoutCancel(ctx), g.inline, max(claimTimeout(ctx), StoreTimeout/10), func(ctx context.Context) error {
		return g.store.Release(ctx, key, token)
	})
	g.storePanicked(m, "release", err)
}

// leaseLost is the answer of a request that lost its key before its
// outcome was kept.
func leaseLost(m *method, err error) error {
	msg := "resilient: " + m.name + ": this request lost its hold on the idempotency key before its outcome was kept; a repeat with the same key gets the outcome of the request that holds it"
	if err != nil {
		msg += " (the handler returned: " + err.Error() + ")"
	}
	// A refusal of this server's (refuse), not the handler's outcome: an
	// outer Guard on another store does not keep it in place of the
	// outcome of the request that holds the key, which its repeat gets.
	sp := &spb.Status{Code: int32(codes.Unavailable), Message: msg}
	if IsDoNotRetry(err) {
		// The handler's failure was marked, its trailer already set: the
		// answer that replaces it keeps the mark.
		sp.Details = []*anypb.Any{doNotRetryDetail}
	}
	return refuse(m.name, sp)
}

// runOwned runs the request whose key this request claimed (the claim sent
// at claimed, for the request of fingerprint fp), renewing the lease
// meanwhile, and keeps its outcome when it is final, retrying until it is
// kept or the lease is lost.
func (g *Guard) runOwned(ctx context.Context, m *method, skey, token string, fp Fingerprint, claimed time.Time, req any, handler grpc.UnaryHandler) (resp any, err error) {
	d := m.dedup
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	k := g.keep(m, skey, token, claimed, func() { cancel(ErrLeaseLost) })
	settled := false
	defer func() {
		k.stop()
		if !settled {
			// A panic: free the key so that a repeat runs again.
			g.release(m, skey, token)
		}
	}()
	hctx, rec := withCapture(hctx)
	hctx = context.WithValue(hctx, heldKeyKey{}, &heldKey{skey: skey, token: token, outer: heldKeyOf(ctx)})
	resp, err = handler(hctx, req)
	returned := time.Now()
	// The handler's context ended before it returned: the caller's
	// deadline or cancellation, the DefaultTimeout, or the Guard's own
	// cancellation for a lost lease (ErrLeaseLost). A failure given then
	// is the ending's, whichever ended it.
	ended := hctx.Err() != nil
	k.stop()
	if !returned.Before(k.giveUp()) {
		// Past giveUp the lease is lost, whether or not the keeper got to
		// say so: a process frozen past it (a stopped VM, a long pause)
		// resumes with the keeper's timer and the handler's return both
		// ready, and the return may come first.
		k.lose("the handler returned after the lease had to be given up: the process was paused or starved for 5/4 of the lease")
	}
	lost := k.isLost()
	var o outcome
	keepable := true
	switch {
	case err == nil:
		msg, ok := resp.(proto.Message)
		if !ok {
			keepable = false
			break
		}
		b, merr := proto.Marshal(msg)
		if merr != nil {
			g.notKeepable(ctx, m, merr)
			keepable = false
			break
		}
		o.response = b
	default:
		// Judged by the status gRPC sends for err: a bare ctx.Err() is
		// the caller's CANCELLED or DEADLINE_EXCEEDED, never kept (so is
		// ErrLeaseLost, the Guard's own cancellation's cause); nor is a
		// refusal of this request by another Guard of this server inside
		// this one (its shed, with a code a FinalCodes may hold,
		// RESOURCE_EXHAUSTED): neither is an answer of the handler's.
		// Nor is UNAUTHENTICATED, whatever FinalCodes hold: it says the
		// credentials sent with this request (not part of the key's
		// request) did not authenticate it, an auth interceptor's inside
		// the Guard or the handler's own, and the caller's retry with
		// fresh ones must run rather than get it replayed for the TTL.
		// Unless a dependency the handler called (through
		// ClientInterceptor) answered it: the server's own credentials
		// failed there, after the handler may have done its work (a
		// charge), which the caller's retry would do again.
		// Nor is a failure the handler gave once its request had ended
		// (or its context was cancelled for a lost lease),
		// whatever its code: its context's error formatted into a status
		// of its own (INTERNAL "context deadline exceeded"), the ending's
		// failure, which kept would be replayed to every retry for the
		// TTL, the operation never run. Unless a call the handler made
		// through ClientInterceptor may have done work (a charge) before
		// the ending, which the retry would do again: one that answered,
		// or failed but for a dependency Guard's refusal (mayHaveActed).
		st := sentStatus(err)
		if !d.final.Has(st.Code()) || refusedHere(err, m.name) ||
			st.Code() == codes.Unauthenticated && !recordOf(ctx).passedOn(codes.Unauthenticated) ||
			ended && !recordOf(ctx).anyActed() {
			keepable = false
			break
		}
		o.status = st.Proto() // a copy
		if !utf8.ValidString(o.status.Message) {
			// gRPC sends such a message as it is, but a proto3 string
			// does not serialize: kept with U+FFFD in place of the
			// invalid bytes rather than not kept, and every repeat run.
			o.status.Message = strings.ToValidUTF8(o.status.Message, "\uFFFD")
		}
	}
	var b []byte
	if keepable {
		o.header, o.trailer = rec.set()
		var eerr error
		if b, eerr = o.encode(); eerr != nil {
			g.notKeepable(ctx, m, eerr)
			keepable = false
		}
	}
	settled = true
	if !keepable {
		g.release(m, skey, token)
		if lost {
			return nil, leaseLost(m, err)
		}
		return resp, err
	}
	switch kerr := g.complete(m, k, skey, token, b); {
	case kerr == nil:
		return resp, err
	case errors.Is(kerr, ErrNotOwner):
		if g.rekeep(m, skey, token, fp, b) {
			return resp, err
		}
		k.lose("the entry was no longer this request's when its outcome was written")
		return nil, leaseLost(m, err)
	case lost && !k.heldAlone(returned):
		return nil, leaseLost(m, err)
	default:
		// The store could not keep the outcome. Also when the lease was
		// given up, if only for the store's silence and the handler
		// returned before the entry could lapse: no other request can
		// have held the key, the handler's answer is the only effect
		// made, and UNAVAILABLE would have its caller retry and run it
		// again once the entry lapsed.
		m.svc.notKept.Add(1)
		if g.logger != nil {
			why := "the idempotency store did not answer for the whole lease"
			if isPanic(kerr) {
				why = "the idempotency store panicked writing it"
			}
			g.logger.ErrorContext(ctx, "outcome of a deduplicated request not kept: "+why+"; the key stays pending until its entry lapses, and a repeat after that runs the handler again",
				"method", m.name, "error", kerr.Error())
		}
		return resp, err
	}
}

// rekeep keeps the outcome b of a request whose entry was gone when it was
// written (a store restarted or failed over without it, or an entry that
// lapsed): if the key is still free, no other request runs with it, so
// this request claims it again and writes its outcome. Telling its caller
// UNAVAILABLE instead would have its client retry with the same key, find
// the key free and run the handler a second time. It reports whether the
// caller gets the handler's answer: the outcome is kept, or the write
// panicked (the key, claimed again, stays pending until it lapses, as
// after complete's panic); a key another request holds is left to it.
func (g *Guard) rekeep(m *method, skey, token string, fp Fingerprint, b []byte) bool {
	c, err := g.claim(context.Background(), m, skey, token, fp, m.dedup.lease, StoreTimeout)
	if err != nil {
		g.storeError(m, "claim", err)
		return false
	}
	g.storeOK()
	if c.State != Claimed {
		return false
	}
	err = bounded(context.Background(), g.inline, StoreTimeout, func(ctx context.Context) error {
		return g.store.Complete(ctx, skey, token, b, m.dedup.ttl)
	})
	if err != nil {
		if !errors.Is(err, ErrNotOwner) {
			g.storeError(m, "complete", err)
		}
		if isPanic(err) {
			m.svc.notKept.Add(1)
			return true
		}
		g.release(m, skey, token)
		return false
	}
	g.storeOK()
	return true
}

// complete writes the outcome, retrying until the entry lapses (3/2
// Lease past the last renewal, k.lapses), every Lease/16 at most, at
// least once: not only while the lease is held (5/4 Lease), which an
// outage shorter than Lease that began just before a renewal left a
// window of a few milliseconds at its end, missed by pauses of 100 ms,
// the outcome not kept and a later repeat run again. A write that lands
// after the entry lapsed is fenced (ErrNotOwner; rekeep claims the key
// again if it is free). A write that panicked is not retried: a panic
// is the Store's bug, not an outage that ends, and retrying it for the
// rest of the lease would hold the caller's answer back until its deadline
// had likely passed (and its client retried, to find the key lapsed and
// run the handler again).
func (g *Guard) complete(m *method, k *keeper, skey, token string, b []byte) error {
	pause, most := pollFirst, min(pollMax, max(k.d/16, pollFirst))
	for first := true; ; first = false {
		left := time.Until(k.lapses())
		if !first && left <= 0 {
			return errors.New("resilient/server: the outcome could not be written before the entry lapsed")
		}
		err := bounded(context.Background(), g.inline, max(min(StoreTimeout, left), StoreTimeout/10), func(ctx context.Context) error {
			return g.store.Complete(ctx, skey, token, b, m.dedup.ttl)
		})
		if err == nil || errors.Is(err, ErrNotOwner) {
			g.storeOK()
			return err
		}
		g.storeError(m, "complete", err)
		if isPanic(err) {
			return err
		}
		wait := min(pause/2+rand.N(pause/2+1), max(time.Until(k.lapses()), 0))
		time.Sleep(wait)
		pause = min(2*pause, most)
	}
}

// replay answers with a kept outcome, its headers and trailers. A kept
// failure is the one its first caller got, refusal marks stripped and
// do-not-retry mark added (the Guard settles the handler's failure before
// keeping it); the mark's trailer, a grpc- key that is not kept, is sent
// again whenever the kept status carries the mark. A refusal mark in a
// kept status (an entry kept by an older Guard, which kept the handler's
// failure as it came) is stripped: this server did not refuse the request.
func replay(ctx context.Context, m *method, b []byte) (any, error) {
	o, err := decodeOutcome(b)
	if err != nil {
		return nil, refusef(m.name, codes.Internal, "resilient: %s: the kept outcome does not decode: %v", m.name, err)
	}
	if len(o.header) > 0 {
		_ = grpc.SetHeader(ctx, o.header)
	}
	trailer := metadata.Join(o.trailer, metadata.Pairs(ReplayedHeader, "true"))
	var failed error
	if o.status != nil {
		failed = notRefusedHere(status.ErrorProto(o.status), m.name)
		if IsDoNotRetry(failed) {
			m.svc.marked.Add(1)
			trailer.Set(PushbackHeader, "-1")
		}
	}
	_ = grpc.SetTrailer(ctx, trailer)
	if failed != nil {
		return nil, failed
	}
	msg := m.dedup.newMsg()
	if err := proto.Unmarshal(o.response, msg); err != nil {
		return nil, refusef(m.name, codes.Internal, "resilient: %s: the kept response does not decode as %s: %v",
			m.name, msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return msg, nil
}

// storeFailed applies the method's OnStoreError when the store could not
// say whether the key is free.
func (g *Guard) storeFailed(ctx context.Context, m *method, req any, handler grpc.UnaryHandler, err error) (any, error) {
	if m.dedup.onErr == policy.StoreErrorRunWithoutDedup {
		// The failed claim took up to a quarter of the time left.
		if err := checkDeadline(ctx, m.name, minDeadlineFor(ctx, m), false); err != nil {
			m.svc.deadlineRefused.Add(1)
			return nil, err
		}
		m.svc.ranWithoutDedup.Add(1)
		return handler(ctx, req)
	}
	what := "cannot be reached"
	if isPanic(err) {
		what = "failed (a bug of the Store: see the Guard's log for its stack)"
	}
	return nil, refusef(m.name, codes.Unavailable,
		"resilient: %s: the idempotency store %s, and the method refuses to run without it: %v", m.name, what, err)
}

// notKeepable logs an outcome that could not be serialized (the key is
// freed, so a repeat runs again).
func (g *Guard) notKeepable(ctx context.Context, m *method, err error) {
	m.svc.notKept.Add(1)
	if g.logger != nil {
		g.logger.ErrorContext(ctx, "outcome of a deduplicated request cannot be serialized, so it is not kept; a repeat runs the handler again",
			"method", m.name, "error", err.Error())
	}
}

// keyedStream refuses a request of m, a deduplicated method, that reached
// the stream interceptor with an idempotency key: its policy leaves Kind
// out for a streaming method (zero is KindUnary, which Validate accepts
// with a Dedup), or a proxy serves it with grpc.UnknownServiceHandler,
// which gRPC runs as a stream. A stream cannot be deduplicated, and
// running it would run every repeat of the key with nothing to say that
// the policy's dedup was not applied. A stream without a key runs, as a
// unary request without one does. The first refusal of each method is
// logged as an error.
func (g *Guard) keyedStream(ctx context.Context, m *method) error {
	md, _ := metadata.FromIncomingContext(ctx)
	keyed := false
	header, vs := m.dedup.keyOf(md)
	for _, v := range vs {
		keyed = keyed || v != ""
	}
	if !keyed {
		return nil
	}
	const why = "but the request reached the Guard as a stream (a streaming method whose policy leaves Kind out, or a proxy's grpc.UnknownServiceHandler), and a stream cannot be deduplicated"
	if g.logger != nil && m.streamLogged.CompareAndSwap(false, true) {
		g.logger.ErrorContext(ctx, "keyed stream of a deduplicated method refused: "+why+"; set the policy's Kind to the method's and drop its Dedup, or serve the method as unary",
			"method", m.name)
	}
	return status.Errorf(codes.Internal,
		"resilient: %s deduplicates by idempotency key (%s header), %s: refused rather than run without dedup; the server's policy must give the method its Kind (and no Dedup for a stream), or the server must serve it as a unary method",
		m.name, header, why)
}

// heldKeyKey is the context key of the idempotency keys the request of a
// context holds: a Guard's dedup claimed them and runs the handler.
type heldKeyKey struct{}

// heldKey is one claim a request holds (its store key and owner
// token), above those other Guards on the same server (outer) hold for it.
type heldKey struct {
	skey, token string
	outer       *heldKey
}

func heldKeyOf(ctx context.Context) *heldKey {
	h, _ := ctx.Value(heldKeyKey{}).(*heldKey)
	return h
}

// holdsClaim reports whether the request of ctx holds the claim of skey
// owned by token: two Guards on one server, each deduplicating its method
// (a library's Guard beside the service's own, built from one generated
// policy), whose stores share their keys (one store, or two on one Redis
// under one prefix), so that the inner one's claim found the outer one's
// pending. The outer one deduplicates the request; the inner passes it on.
// Found pending under another token, the key is another request's (a
// repeat on another replica), waited for as ever.
func holdsClaim(ctx context.Context, skey, token string) bool {
	if token == "" {
		return false
	}
	for h := heldKeyOf(ctx); h != nil; h = h.outer {
		if h.skey == skey && h.token == token {
			return true
		}
	}
	return false
}
