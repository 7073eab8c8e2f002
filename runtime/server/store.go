package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// Store keeps the idempotency entries of deduplicated methods. An entry is
// pending (a request with the key is running; it names its owner's token
// and expires after a lease unless renewed) or done (the encoded outcome,
// kept for the method's TTL); both carry the fingerprint of the request
// that claimed the key. Every method must be atomic with respect to the
// others on the same key, across every replica sharing the store: that is
// what makes "the handler runs once" hold. The Guard bounds every call by
// its own timeout (StoreTimeout) whether or not the store honours ctx.
//
// A Store that also has a method Err() error is asked at NewGuard, which
// refuses it when Err returns an error (redisstore.New's store of a nil
// client does). A Store that panics does not take the server down: the
// Guard recovers the panic and goes on as after a failed operation (see
// the README's Idempotency dedup section for what that means for each
// method), logging it with its stack each time.
//
// NewMemoryStore is a Store for one replica; the redisstore package holds
// one on Redis for several.
type Store interface {
	// Claim makes key pending, owned by token, for the request whose
	// fingerprint is fp, for lease, if it holds no entry; otherwise it
	// reports the entry it holds. A key already pending under token with
	// fp (a claim carried out whose answer was lost, then retried) is
	// Claimed again, its lease restarted.
	Claim(ctx context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error)
	// Renew extends the lease of key to lease from now, if it is still
	// pending and owned by token. It returns ErrNotOwner otherwise.
	Renew(ctx context.Context, key, token string, lease time.Duration) error
	// Complete replaces the pending entry owned by token with the outcome
	// (opaque bytes), kept for ttl with the pending entry's fingerprint. It
	// returns ErrNotOwner, and writes nothing, if key is not pending under
	// token: the owner's fencing token, so a request whose lease lapsed
	// never writes over the request that took the key over. A key already
	// done with this very outcome (a Complete carried out whose answer was
	// lost, then retried) returns nil: the caller's answer is the kept one.
	Complete(ctx context.Context, key, token string, outcome []byte, ttl time.Duration) error
	// Release deletes key if it is pending under token (the request ended
	// with an outcome that is not kept), so a repeat runs again.
	Release(ctx context.Context, key, token string) error
}

// ClaimState is what Claim found.
type ClaimState uint8

const (
	// Claimed: the key was free; the caller owns it and runs the request.
	Claimed ClaimState = iota
	// Pending: another request with the key is running.
	Pending
	// Done: a request with the key ended; Claim.Outcome is its outcome.
	Done
)

// Claim is the result of Store.Claim.
type Claim struct {
	State ClaimState
	// Fingerprint is that of the request that claimed the key, when State
	// is Pending or Done.
	Fingerprint Fingerprint
	// Outcome is the bytes given to Complete, when State is Done.
	Outcome []byte
	// Token is the owner's token, when State is Pending: a Guard whose
	// request's own claim it is (another Guard on the same server, whose
	// interceptor runs outside this one's, claimed the key in this store)
	// passes the request on instead of waiting for itself. A Store that
	// leaves it empty is correct but has two such Guards on one store wait
	// for the request's own claim until its deadline.
	Token string
}

// Fingerprint identifies the request that claimed a key: the SHA-256 of its
// deterministic protobuf serialization. A repeat whose fingerprint differs
// is another request reusing the key, and is refused.
type Fingerprint [32]byte

// ErrNotOwner is returned by Renew and Complete when the key is no longer
// pending under the token: the lease lapsed and another request took it,
// or the entry expired.
var ErrNotOwner = errors.New("resilient/server: idempotency key no longer held by this request")

// newToken returns a random owner token: 32 hexadecimal digits.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
