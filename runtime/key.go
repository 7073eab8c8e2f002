package runtime

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/go-resilient/resilient/internal/contract"
)

// KeyFromInt formats a signed integer key field (an idempotency key, or a
// part of a cache key). 0 gives the empty key: proto3 cannot tell a field
// left unset from 0, so 0 is no idempotency key (the call is never
// retried and no idempotency-key is sent), as an empty string is; as a
// cache key it stays distinct from every other value.
func KeyFromInt(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// KeyFromUint formats an unsigned integer key field; 0 gives the empty
// key, as with KeyFromInt.
func KeyFromUint(v uint64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

// KeyFromBytes formats a bytes idempotency key field as unpadded URL-safe
// base64, so that any value travels in gRPC metadata. An empty field gives an
// empty key.
func KeyFromBytes(v []byte) string { return base64.RawURLEncoding.EncodeToString(v) }

// newIdempotencyKey returns a random key of 128 bits (26 characters of
// base32), for a method with GenerateIdempotencyKey: one per logical call,
// the same on each of its attempts and hedged copies.
func newIdempotencyKey() string { return rand.Text() }

// refuseKey refuses an idempotency key read from a request that cannot
// travel as it is: a byte outside printable ASCII (0x20 to 0x7E), which
// gRPC metadata cannot carry (grpc-go would fail every attempt with
// INTERNAL, unsent, and a fallback would answer it), or longer than
// contract.MaxIdempotencyKeyLength, which the server refuses after the
// request was sent. Encoding such a key instead would change the key the
// server, an Envoy route or a client in another language sees for the same
// request, so it is refused: INVALID_ARGUMENT naming the method and the
// field, before any layer. Called only for a key that is not empty; a
// generated key, a bytes key (base64) and an integer key are printable,
// so only a string key's bytes or any key's length can be wrong.
func refuseKey(m *methodState, key string) error {
	if len(key) > contract.MaxIdempotencyKeyLength {
		return misuseError(codes.InvalidArgument, m.policy.Name, fmt.Sprintf(
			"the idempotency key (request field %s) is %d bytes as sent, longer than the %d a server keeps: "+
				"use a shorter key (a bytes field is sent in base64, 4 characters for each 3 bytes)",
			m.policy.IdempotencyKey, len(key), contract.MaxIdempotencyKeyLength))
	}
	for i := 0; i < len(key); i++ {
		if b := key[i]; b < 0x20 || b > 0x7e {
			return misuseError(codes.InvalidArgument, m.policy.Name, fmt.Sprintf(
				"the idempotency key (request field %s) holds byte %#02x at offset %d, outside the printable ASCII "+
					"(0x20 to 0x7E) that gRPC metadata carries: nothing was sent; make the key of printable ASCII "+
					"(an ASCII id or a UUID), or make the field bytes, sent in base64",
				m.policy.IdempotencyKey, b, i))
		}
	}
	return nil
}

// withoutForwardedKey returns ctx without the idempotency-key values its
// metadata carries, for a call whose key the runtime sends itself (the
// request's key field, or a generated key): a service that forwards its
// incoming metadata to the services it calls would send its own caller's
// key beside the request's (runtime/server refuses a request with two
// values), or, for a call without a key value, in its place (two orders of
// that caller would share it). Both copies go: the outgoing metadata's,
// where a service that forwards in its handler put it, and the incoming
// metadata's, which an interceptor of the connection beneath the runtime
// forwards after it (the interceptors see the call's context, the handler's
// own is unchanged). A context that carries no such header is returned as
// it is, at the cost of two look-ups.
func withoutForwardedKey(ctx context.Context) context.Context {
	if metadata.ValueFromOutgoingContext(ctx, IdempotencyKeyHeader) != nil {
		md, _ := metadata.FromOutgoingContext(ctx) // a copy
		md.Delete(IdempotencyKeyHeader)
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	if metadata.ValueFromIncomingContext(ctx, IdempotencyKeyHeader) != nil {
		md, _ := metadata.FromIncomingContext(ctx) // a copy
		md.Delete(IdempotencyKeyHeader)
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	return ctx
}
