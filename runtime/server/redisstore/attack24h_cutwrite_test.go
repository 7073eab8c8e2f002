package redisstore

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-resilient/resilient/runtime/server"
)

// cutter forwards connections to a target and, once armed with n, passes
// on exactly n more bytes the client sends, then closes the connection:
// a write cut at a byte of the test's choosing.
type cutter struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	left   int // bytes still to pass on once armed; <0 unarmed
	wg     sync.WaitGroup
	conns  []net.Conn
}

func startCutter(t *testing.T, target string) *cutter {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{lis: lis, target: target, left: -1}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			down, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = down.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, down, up)
			c.mu.Unlock()
			c.wg.Add(2)
			go func() { // replies as they come
				defer c.wg.Done()
				defer down.Close()
				defer up.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := up.Read(buf)
					if n > 0 {
						if _, werr := down.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() {
				defer c.wg.Done()
				defer down.Close()
				defer up.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := down.Read(buf)
					if n > 0 {
						c.mu.Lock()
						pass, done := n, false
						if c.left >= 0 {
							pass = min(n, c.left)
							c.left -= pass
							done = c.left == 0
							if done {
								c.left = -1
							}
						}
						c.mu.Unlock()
						if _, werr := up.Write(buf[:pass]); werr != nil || done {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		c.mu.Lock()
		for _, cn := range c.conns {
			_ = cn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
	return c
}

func (c *cutter) arm(n int) {
	c.mu.Lock()
	c.left = n
	c.mu.Unlock()
}

// TestAttack24hOutcomeCutBetweenPiecesIsNeverRead: an outcome is sent to
// Redis in pieces of 512 KiB, joined by the script. A write whose
// connection is cut after some of its bytes (in its first piece, between
// pieces, all but its last byte) must leave the request's pending entry
// as it was: a duplicate never reads a partial outcome as Done; the
// retried write, on another connection, keeps the whole of it.
func TestAttack24hOutcomeCutBetweenPiecesIsNeverRead(t *testing.T) {
	rs := startRedis(t)
	direct := client(t, rs.addr)
	cut := startCutter(t, rs.addr)
	viaCut := redis.NewClient(&redis.Options{Addr: cut.lis.Addr().String(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { _ = viaCut.Close() })
	cutStore, store := New(viaCut, "cut:"), New(direct, "cut:")
	ctx := context.Background()
	fp := server.Fingerprint{9}
	out := make([]byte, 3*outcomePiece+123)
	for i := range out {
		out[i] = byte(i*7 + 1)
	}
	// The script loaded first (EVALSHA, not EVAL, is the write cut), and
	// the connection's handshake done.
	if err := completeScript.Load(ctx, direct).Err(); err != nil {
		t.Fatal(err)
	}
	for i, at := range []int{10, outcomePiece / 2, outcomePiece + 40, 2*outcomePiece + 40, len(out)} {
		key, token := "k"+string(rune('a'+i)), "tok-"+string(rune('a'+i))
		if c, err := store.Claim(ctx, key, token, fp, time.Minute); err != nil || c.State != server.Claimed {
			t.Fatalf("claim: %+v %v", c, err)
		}
		if err := viaCut.Ping(ctx).Err(); err != nil {
			t.Fatalf("ping through the cutter: %v", err)
		}
		cut.arm(at)
		if err := cutStore.Complete(ctx, key, token, out, time.Minute); err == nil {
			t.Fatalf("cut after %d bytes: the write succeeded", at)
		}
		v, err := direct.Get(ctx, "cut:"+key).Result()
		if err != nil || len(v) == 0 || v[0] != 'p' {
			t.Errorf("cut after %d bytes: the entry is %d bytes beginning %q (%v); want the pending entry as it was", at, len(v), v[:min(len(v), 1)], err)
		}
		if c, err := store.Claim(ctx, key, "dup", fp, time.Minute); err != nil || c.State == server.Done {
			t.Errorf("cut after %d bytes: a duplicate's claim: state %v, %d bytes, %v; want the request still running", at, c.State, len(c.Outcome), err)
		}
		if err := store.Complete(ctx, key, token, out, time.Minute); err != nil {
			t.Errorf("cut after %d bytes: the retried write: %v", at, err)
		}
		if c, err := store.Claim(ctx, key, "dup", fp, time.Minute); err != nil || c.State != server.Done || !bytes.Equal(c.Outcome, out) {
			t.Errorf("cut after %d bytes: after the retry: state %v, %d bytes (want %d), %v", at, c.State, len(c.Outcome), len(out), err)
		}
	}
}
