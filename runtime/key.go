package runtime

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
)

// KeyFromInt formats a signed integer idempotency key field.
func KeyFromInt(v int64) string { return strconv.FormatInt(v, 10) }

// KeyFromUint formats an unsigned integer idempotency key field.
func KeyFromUint(v uint64) string { return strconv.FormatUint(v, 10) }

// KeyFromBytes formats a bytes idempotency key field as unpadded URL-safe
// base64, so that any value travels in gRPC metadata. An empty field gives an
// empty key.
func KeyFromBytes(v []byte) string { return base64.RawURLEncoding.EncodeToString(v) }

// NewIdempotencyKey returns a random key of 128 bits (26 characters of
// base32), for a method with GenerateIdempotencyKey: one per logical call,
// the same on each of its attempts and hedged copies.
func NewIdempotencyKey() string { return rand.Text() }
