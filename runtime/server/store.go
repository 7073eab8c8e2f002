package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// Store keeps the idempotency entries of deduplicated methods. An entry is
// pending (a request with the key is running; it names its owner and
// expires after a lease unless renewed) or done (the outcome, kept for the
// method's TTL). Every method must be atomic with respect to the others on
// the same key, across every replica sharing the store: that is what makes
// "the handler runs once" hold.
type Store interface {
	// Claim makes key pending, owned by token, for lease, if it holds no
	// entry; otherwise it reports the entry it holds.
	Claim(ctx context.Context, key, token string, lease time.Duration) (Claim, error)
	// Renew extends the lease of key, if it is still pending and owned by
	// token. It returns ErrNotOwner otherwise.
	Renew(ctx context.Context, key, token string, lease time.Duration) error
	// Complete replaces the pending entry owned by token with the outcome,
	// kept for ttl. It returns ErrNotOwner, and writes nothing, if key is
	// not pending under token.
	Complete(ctx context.Context, key, token string, outcome Outcome, ttl time.Duration) error
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
	State   ClaimState
	Outcome Outcome // when State is Done
}

// Outcome is the kept result of a request: the serialized response, or the
// final status when the request failed with an answer.
type Outcome struct {
	Response []byte      // proto.Marshal of the response; used when Status is nil
	Status   *spb.Status // the final status, nil for a response
}

// ErrNotOwner is returned by Renew and Complete when the key is no longer
// pending under the token: the lease lapsed and another request took it.
var ErrNotOwner = errors.New("resilient/server: idempotency key no longer held by this request")

// The encoding of entries in a byte store: one letter, then the payload.
const (
	tagPending  = 'p' // then the owner's token
	tagResponse = 'r' // then the response bytes
	tagStatus   = 's' // then the status proto
)

func (o Outcome) encode() ([]byte, error) {
	if o.Status == nil {
		return append([]byte{tagResponse}, o.Response...), nil
	}
	b, err := proto.Marshal(o.Status)
	if err != nil {
		return nil, err
	}
	return append([]byte{tagStatus}, b...), nil
}

func decodeOutcome(b []byte) (Outcome, error) {
	if len(b) == 0 {
		return Outcome{}, errors.New("resilient/server: empty idempotency entry")
	}
	switch b[0] {
	case tagResponse:
		return Outcome{Response: b[1:]}, nil
	case tagStatus:
		st := new(spb.Status)
		if err := proto.Unmarshal(b[1:], st); err != nil {
			return Outcome{}, fmt.Errorf("resilient/server: idempotency entry: %w", err)
		}
		return Outcome{Status: st}, nil
	}
	return Outcome{}, fmt.Errorf("resilient/server: idempotency entry of unknown kind %q", b[0])
}

// newToken returns a random owner token.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
