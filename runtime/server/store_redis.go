package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore is a Store on Redis, for a service with several replicas:
// they share the entries, so a repeat that reaches another replica is still
// answered from the first one's outcome.
//
// Each operation is one Lua script, which Redis runs atomically: Claim
// reads the key and, only if it is absent, writes the pending entry with its
// lease (a SET … NX in effect), so of any number of replicas racing on a key
// exactly one gets Claimed; Renew, Complete and Release act only if the key
// still holds the pending entry of their token, so a request whose lease
// lapsed (its replica lost Redis or stalled) can neither overwrite nor
// delete the entry of the request that took over.
type RedisStore struct {
	rdb    redis.Scripter
	prefix string
}

// NewRedisStore returns a store keeping its entries in rdb (a *redis.Client,
// or any client that runs scripts, such as a *redis.ClusterClient) under
// keys that start with prefix, such as "inventory:idem:". Every operation
// runs under the request's context, so a Redis that does not answer holds
// a request at most until its deadline; the client's DialTimeout and
// MaxRetries decide how fast an unreachable Redis is noticed before that.
func NewRedisStore(rdb redis.Scripter, prefix string) *RedisStore {
	return &RedisStore{rdb: rdb, prefix: prefix}
}

var (
	// KEYS[1] the key; ARGV[1] the pending entry, ARGV[2] the lease in ms.
	// Returns the entry the key holds, or nil after claiming it.
	claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`)
	// ARGV[1] the pending entry of the token, ARGV[2] the lease in ms.
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)
	// ARGV[1] the pending entry of the token, ARGV[2] the outcome, ARGV[3]
	// the TTL in ms.
	completeScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`)
	// ARGV[1] the pending entry of the token.
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)
)

func pendingEntry(token string) string { return string(tagPending) + token }

func millis(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

func (s *RedisStore) wrap(op, key string, err error) error {
	return fmt.Errorf("resilient/server: redis %s %s%s: %w", op, s.prefix, key, err)
}

// Claim implements Store.
func (s *RedisStore) Claim(ctx context.Context, key, token string, lease time.Duration) (Claim, error) {
	v, err := claimScript.Run(ctx, s.rdb, []string{s.prefix + key}, pendingEntry(token), millis(lease)).Text()
	if errors.Is(err, redis.Nil) {
		return Claim{State: Claimed}, nil
	}
	if err != nil {
		return Claim{}, s.wrap("claim", key, err)
	}
	if len(v) > 0 && v[0] == tagPending {
		return Claim{State: Pending}, nil
	}
	o, err := decodeOutcome([]byte(v))
	if err != nil {
		return Claim{}, s.wrap("claim", key, err)
	}
	return Claim{State: Done, Outcome: o}, nil
}

// Renew implements Store.
func (s *RedisStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	n, err := renewScript.Run(ctx, s.rdb, []string{s.prefix + key}, pendingEntry(token), millis(lease)).Int()
	if err != nil {
		return s.wrap("renew", key, err)
	}
	if n == 0 {
		return ErrNotOwner
	}
	return nil
}

// Complete implements Store.
func (s *RedisStore) Complete(ctx context.Context, key, token string, o Outcome, ttl time.Duration) error {
	b, err := o.encode()
	if err != nil {
		return s.wrap("complete", key, err)
	}
	n, err := completeScript.Run(ctx, s.rdb, []string{s.prefix + key}, pendingEntry(token), b, millis(ttl)).Int()
	if err != nil {
		return s.wrap("complete", key, err)
	}
	if n == 0 {
		return ErrNotOwner
	}
	return nil
}

// Release implements Store.
func (s *RedisStore) Release(ctx context.Context, key, token string) error {
	if err := releaseScript.Run(ctx, s.rdb, []string{s.prefix + key}, pendingEntry(token)).Err(); err != nil {
		return s.wrap("release", key, err)
	}
	return nil
}
