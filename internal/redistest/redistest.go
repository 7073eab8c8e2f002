// Package redistest holds what the tests that run against a real
// redis-server share.
package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// OpenConns opens n connections of rdb's pool, their handshakes sent,
// and gives them back to the pool before the test's timed part: go-redis
// dials a connection, and sends its handshake, at the first command that
// finds none idle, so concurrent commands of a test would each pay a dial
// and its round trips inside the test's bounds (on a loaded machine,
// past a 500 ms store timeout). Each connection is held while the next is
// taken, so exactly n are opened, however slow the machine.
func OpenConns(t testing.TB, rdb *redis.Client, n int) {
	t.Helper()
	conns := make([]*redis.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close() // back to the pool
		}
	}()
	for range n {
		c := rdb.Conn()
		conns = append(conns, c)
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatalf("redis: open a connection: %v", err)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	if idle := rdb.PoolStats().IdleConns; idle < uint32(n) {
		t.Fatalf("redis: %d connections idle in the pool after opening %d", idle, n)
	}
}
