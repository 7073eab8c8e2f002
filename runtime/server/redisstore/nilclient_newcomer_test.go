// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-resilient/resilient/runtime/server"
)

// TestNewcomerNilRedisClient: the README's server snippet is
// server.WithStore(redisstore.New(rdb, "idem:")). A program whose rdb is
// left unset on some path (`var rdb *redis.Client`, or a nil Scripter)
// gets a non-nil *Store that NewGuard accepts; the first keyed request then
// calls Claim on a nil client. The Guard runs a Redis store's operations on
// a goroutine of its own (storecall.go, bounded), so that panic is not even
// recoverable by a recovering interceptor: it ends the server process. New
// cannot return an error without changing its signature; NewGuard (or
// New) should refuse the nil client, or Claim should fail with an error
// the Guard turns into UNAVAILABLE.
func TestNewcomerNilRedisClient(t *testing.T) {
	t.Skip("BROKEN: redisstore.New(nil or (*redis.Client)(nil), prefix) is accepted, and the first keyed request panics on a goroutine of the Guard's, ending the server process")
	for name, rdb := range map[string]redis.Scripter{"nil": nil, "(*redis.Client)(nil)": (*redis.Client)(nil)} {
		t.Run(name, func(t *testing.T) {
			s := New(rdb, "idem:")
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Claim on a store built on a %s client panicked: %v; want an error", name, r)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, err := s.Claim(ctx, "k", "t", server.Fingerprint{}, time.Second); err == nil {
				t.Errorf("Claim on a store built on a %s client: no error", name)
			}
		})
	}
}
