// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-resilient/resilient/runtime/policy"
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
			for op, err := range map[string]error{
				"Renew":    s.Renew(ctx, "k", "t", time.Second),
				"Complete": s.Complete(ctx, "k", "t", nil, time.Second),
				"Release":  s.Release(ctx, "k", "t"),
			} {
				if err == nil {
					t.Errorf("%s on a store built on a %s client: no error", op, name)
				}
			}
			// The program learns it at start-up, not at its first keyed
			// request.
			_, err := server.NewGuard([]*policy.Server{reserveStockPolicy(time.Second, policy.StoreErrorRefuse)}, server.WithStore(s))
			if err == nil || !strings.Contains(err.Error(), "the Redis client is nil") || !strings.Contains(err.Error(), "New("+name) {
				t.Errorf("NewGuard with the store of a %s client: %v, want it refused, naming the nil client", name, err)
			}
		})
	}
}

// TestNewWithClientWorks: a store of a real client reports no error, and
// NewGuard takes it.
func TestNewWithClientWorks(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer func() { _ = rdb.Close() }()
	s := New(rdb, "idem:")
	if err := s.Err(); err != nil {
		t.Fatalf("New with a client: Err() = %v, want nil", err)
	}
	if _, err := server.NewGuard([]*policy.Server{reserveStockPolicy(time.Second, policy.StoreErrorRefuse)}, server.WithStore(s)); err != nil {
		t.Errorf("NewGuard with the store of a client: %v", err)
	}
}
