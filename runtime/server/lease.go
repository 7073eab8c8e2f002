package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrLeaseLost is the cause (context.Cause) with which the Guard cancels a
// deduplicated handler's context when its request lost its hold on the
// idempotency key: the store could not be reached to renew the lease for
// the whole Lease, or another request took the key over. A handler that
// honours its context stops before committing; its caller gets UNAVAILABLE
// and, repeating with the same key, the outcome of the request that owns
// the key.
//
// It is a cancellation: errors.Is(ErrLeaseLost, context.Canceled) holds,
// so that a handler returning it as context.Cause gives it (bare, wrapped,
// or through status.FromContextError) ends with CANCELLED, as gRPC answers
// a context's error, never with an UNKNOWN that a FinalCodes holding
// UNKNOWN would keep as the request's answer.
var ErrLeaseLost error = errLeaseLost{}

type errLeaseLost struct{}

func (errLeaseLost) Error() string {
	return "resilient/server: this request lost its idempotency key's lease"
}
func (errLeaseLost) Is(target error) bool { return target == context.Canceled }

// The lease arithmetic, for a policy.Dedup.Lease d:
//   - the owner renews every d/4 (and retries a failed renewal every d/16),
//     each renewal bounded by renewBound(d), d/2 (StoreTimeout at most), so
//     a store slower than d/4 a reply renews; a claim answered no faster
//     than renewBound(d) is the store failing (dedup), since no renewal
//     would succeed at that speed;
//   - the store keeps a pending entry for 3d/2 past each claim or renewal
//     (entryLease);
//   - the owner gives up, cancelling its handler, when 5d/4 have passed
//     since the last claim or renewal it sent that succeeded (giveUp);
//   - the outcome's write is retried until the entry lapses, 3d/2 past
//     that (lapses): one that lands later is fenced by the token.
//
// So a store outage shorter than d never costs the key (the last renewal
// was at most d/4 before it began), and a handler that loses the key has
// d/4 to stop before the entry can lapse and a repeat take over. After a
// crash, a repeat takes over within 3d/2.
//
// A lease is at most policy.MaxLease (NewGuard refuses a longer one), so
// none of these sums comes near wrapping.
func entryLease(d time.Duration) time.Duration { return d + d/2 }

// renewBound is the longest a renewal of a lease d is waited for (less
// when the lease has less left): half the lease, so that a renewal stuck
// on a dead connection leaves time for another before the lease is given
// up, and at most StoreTimeout.
func renewBound(d time.Duration) time.Duration { return min(StoreTimeout, d/2) }

// keeper holds the lease of one running request: it renews it, and
// cancels the handler when it is lost.
type keeper struct {
	g          *Guard
	m          *method
	key, token string
	d          time.Duration
	onLost     func()

	mu      sync.Mutex
	renewed time.Time // when the last successful claim or renewal was sent
	lost    bool
	taken   bool // lost because the key was no longer pending under the token

	panicLogged bool // a renewal's panic was logged (run's alone)

	done, finished chan struct{}
}

// keep starts renewing the lease of key, claimed by a request sent at
// claimed; onLost is called, once, if the lease is lost.
func (g *Guard) keep(m *method, key, token string, claimed time.Time, onLost func()) *keeper {
	k := &keeper{g: g, m: m, key: key, token: token, d: m.dedup.lease, onLost: onLost,
		renewed: claimed, done: make(chan struct{}), finished: make(chan struct{})}
	go k.run()
	return k
}

// giveUp is when the owner stops believing it holds the key.
func (k *keeper) giveUp() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.renewed.Add(k.d + k.d/4)
}

// lapses is when the entry lapses, unless renewed: 3/2 Lease past the
// last renewal sent that succeeded.
func (k *keeper) lapses() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.renewed.Add(entryLease(k.d))
}

func (k *keeper) isLost() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lost
}

// heldAlone reports whether, at t, no other request can have held the
// key although the lease was lost: it was given up only because the
// store could not be reached (never found taken), and the entry, which
// lives 3/2 Lease past the last renewal, had not yet lapsed.
func (k *keeper) heldAlone(t time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.taken && t.Before(k.renewed.Add(entryLease(k.d)))
}

// lose marks the lease lost and tells the handler, once.
func (k *keeper) lose(why string) {
	k.mu.Lock()
	already := k.lost
	k.lost = true
	k.mu.Unlock()
	if already {
		return
	}
	k.m.svc.leasesLost.Add(1)
	if k.g.logger != nil {
		k.g.logger.LogAttrs(context.Background(), slog.LevelWarn, "deduplicated request lost its idempotency key; its handler's context is cancelled (cause server.ErrLeaseLost)",
			slog.String("method", k.m.name), slog.String("why", why))
	}
	k.onLost()
}

func (k *keeper) run() {
	defer close(k.finished)
	every, retry := k.d/4, k.d/16
	k.mu.Lock()
	next := k.renewed.Add(every) // the claim + d/4
	k.mu.Unlock()
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for {
		select {
		case <-k.done:
			return
		case <-t.C:
		}
		now := time.Now()
		left := k.giveUp().Sub(now)
		if left <= 0 {
			k.lose("the store could not be reached to renew the lease for the whole lease")
			return
		}
		// Half the lease, not the d/4 between renewals: a store slower
		// than d/4 a reply still renews in time (the entry lives 3d/2
		// past each renewal sent), and a renewal stuck on a dead
		// connection leaves time for another before giveUp. The claim
		// was answered faster than that (dedup refuses a slower one).
		err := bounded(context.Background(), k.g.inline, min(renewBound(k.d), left), func(ctx context.Context) error {
			return k.g.store.Renew(ctx, k.key, k.token, entryLease(k.d))
		})
		switch {
		case err == nil:
			k.g.storeOK()
			k.mu.Lock()
			k.renewed = now
			k.mu.Unlock()
			t.Reset(time.Until(now.Add(every)))
		case errors.Is(err, ErrNotOwner):
			k.g.storeOK()
			k.mu.Lock()
			k.taken = true
			k.mu.Unlock()
			k.lose("the key is no longer pending under this request: its entry lapsed or another request took it")
			return
		default:
			k.g.storeErrorLogged(k.m, "renew", err, &k.panicLogged)
			t.Reset(min(retry, time.Until(k.giveUp())))
		}
	}
}

// stop ends the renewing and waits for it.
func (k *keeper) stop() {
	select {
	case <-k.done:
	default:
		close(k.done)
	}
	<-k.finished
}
