// Package redisstore is the idempotency store of runtime/server on Redis,
// for a service with several replicas: they share the entries, so a repeat
// that reaches another replica is still answered from the first one's
// outcome. It is a package of its own so that a program that does not
// use it does not link go-redis.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-resilient/resilient/runtime/server"
)

// Store is a server.Store on Redis.
//
// Each operation is one Lua script, which Redis runs atomically: Claim
// reads the key and, only if it is absent, writes the pending entry with its
// lease (a SET … NX in effect), so of any number of replicas racing on a key
// exactly one gets Claimed; Renew, Complete and Release act only if the key
// still holds the pending entry of their token (the owner's fencing
// token), so a request whose lease lapsed (its replica lost Redis or
// stalled) can neither overwrite nor delete the entry of the request that
// took over.
//
// An entry is one Redis string: "p", the 32-byte request fingerprint and
// the owner's token while pending; "d", the fingerprint and the outcome
// when done.
type Store struct {
	rdb    redis.Scripter
	prefix string
	err    error // why the store cannot work (a nil client), or nil
}

// New returns a store keeping its entries in rdb (a *redis.Client, or any
// client that runs scripts, such as a *redis.ClusterClient) under keys that
// start with prefix, such as "inventory:idem:". The Guard bounds every
// operation by server.StoreTimeout, and stops waiting then even if the
// client does not; give the client ContextTimeoutEnabled: true so that it
// also abandons the operation and frees its connection at that bound
// (without it, go-redis waits for its ReadTimeout, 3 s by default). Every
// entry has a TTL, so a Redis whose maxmemory-policy evicts (volatile-* or
// allkeys-*) drops them first when full, freeing keys whose requests still
// run: use a Redis with maxmemory-policy noeviction, or one of the store's
// own.
//
// A nil rdb (or a nil *redis.Client in it) makes a store that cannot work:
// Err says so, server.NewGuard refuses it with that error, and each of its
// operations returns it.
func New(rdb redis.Scripter, prefix string) *Store {
	s := &Store{rdb: rdb, prefix: prefix}
	if v := reflect.ValueOf(rdb); !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		arg := "nil"
		if v.IsValid() {
			arg = fmt.Sprintf("(%T)(nil)", rdb)
		}
		s.err = fmt.Errorf("resilient/server/redisstore: New(%s, %q): the Redis client is nil: give New the client of the store's Redis (redis.NewClient(&redis.Options{…}))", arg, prefix)
	}
	return s
}

// Err is nil for a store that can work, and otherwise says why not (New
// was given a nil client). server.NewGuard calls it, and refuses a store
// that reports an error.
func (s *Store) Err() error { return s.err }

var (
	// KEYS[1] the key; ARGV[1] the pending entry, ARGV[2] the lease in ms.
	// Returns the entry the key holds, or nil after claiming it. A key that
	// already holds this very pending entry (the claim was carried out and
	// its reply lost, then retried by go-redis) counts as claimed.
	claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`)
	// ARGV[1] the token, ARGV[2] the lease in ms.
	renewScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'p' and string.sub(v, 34) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	// ARGV[1] the token, ARGV[2] the TTL in ms, ARGV[3…] the outcome in
	// pieces (outcomePiece). A key already done with this very outcome
	// (the write was carried out and its reply lost, then retried) counts
	// as written. The outcome is written even when Redis is past its
	// maxmemory (noeviction refusing every write that grows memory, "OOM
	// command not allowed"): it replaces the request's own entry, and the
	// handler's effect is made, so refusing it would leave the key to
	// lapse and a retry to run the handler again. Redis refuses such a
	// write only as a script's first write, so the PEXPIRE (which Redis
	// never refuses for memory) comes first.
	completeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local o = table.concat(ARGV, '', 3)
if v and string.sub(v, 1, 1) == 'p' and string.sub(v, 34) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[1], 'd' .. string.sub(v, 2, 33) .. o, 'PX', ARGV[2])
  return 1
end
if v and string.sub(v, 1, 1) == 'd' and string.sub(v, 34) == o then
  return 1
end
return 0`)
	// ARGV[1] the token.
	releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'p' and string.sub(v, 34) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

const fpLen = len(server.Fingerprint{})

// outcomePiece is the longest piece of an outcome sent to Redis as one
// argument: half of the least proto-max-bulk-len Redis can be given
// (1 MB), beyond which it refuses the argument and closes the connection.
const outcomePiece = 512 << 10

func pendingEntry(fp server.Fingerprint, token string) string {
	return "p" + string(fp[:]) + token
}

func millis(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

func (s *Store) wrap(op, key string, err error) error {
	return fmt.Errorf("resilient/server/redisstore: %s %s%s: %w", op, s.prefix, key, err)
}

// Claim implements server.Store.
func (s *Store) Claim(ctx context.Context, key, token string, fp server.Fingerprint, lease time.Duration) (server.Claim, error) {
	if s.err != nil {
		return server.Claim{}, s.err
	}
	v, err := claimScript.Run(ctx, s.rdb, []string{s.prefix + key}, pendingEntry(fp, token), millis(lease)).Text()
	if errors.Is(err, redis.Nil) {
		return server.Claim{State: server.Claimed}, nil
	}
	if err != nil {
		return server.Claim{}, s.wrap("claim", key, err)
	}
	if len(v) < 1+fpLen || (v[0] != 'p' && v[0] != 'd') {
		return server.Claim{}, s.wrap("claim", key, errors.New("the key holds no idempotency entry of this version: another program writes under the prefix"))
	}
	c := server.Claim{State: server.Pending}
	copy(c.Fingerprint[:], v[1:1+fpLen])
	if v[0] == 'd' {
		c.State, c.Outcome = server.Done, []byte(v[1+fpLen:])
	} else {
		c.Token = v[1+fpLen:]
	}
	return c, nil
}

// Renew implements server.Store.
func (s *Store) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	if s.err != nil {
		return s.err
	}
	n, err := renewScript.Run(ctx, s.rdb, []string{s.prefix + key}, token, millis(lease)).Int()
	if err != nil {
		return s.wrap("renew", key, err)
	}
	if n == 0 {
		return server.ErrNotOwner
	}
	return nil
}

// Complete implements server.Store.
func (s *Store) Complete(ctx context.Context, key, token string, outcome []byte, ttl time.Duration) error {
	if s.err != nil {
		return s.err
	}
	args := make([]any, 0, 3+len(outcome)/outcomePiece)
	args = append(args, token, millis(ttl))
	for len(outcome) > outcomePiece {
		args = append(args, outcome[:outcomePiece])
		outcome = outcome[outcomePiece:]
	}
	args = append(args, outcome)
	n, err := completeScript.Run(ctx, s.rdb, []string{s.prefix + key}, args...).Int()
	if err != nil {
		return s.wrap("complete", key, err)
	}
	if n == 0 {
		return server.ErrNotOwner
	}
	return nil
}

// Release implements server.Store.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if s.err != nil {
		return s.err
	}
	if err := releaseScript.Run(ctx, s.rdb, []string{s.prefix + key}, token).Err(); err != nil {
		return s.wrap("release", key, err)
	}
	return nil
}
