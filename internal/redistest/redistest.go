// Package redistest holds what the tests that run against a real
// redis-server share.
package redistest

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

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

// Server is a redis-server started for one test.
type Server struct {
	Addr string // 127.0.0.1:port
	// Kill kills the process and waits for it to exit (also done at the
	// test's end; calling it twice is harmless).
	Kill func()
}

// Start starts the redis-server at path on a free loopback port, without
// persistence, in a temporary directory, with args added to its command
// line, and waits for it to answer a PING (at most 5 s). The free port is
// found by listening on it and closing it, so a test of another package
// running beside this one (go test runs packages in parallel) may take it
// before redis-server binds it; redis-server then exits, and a PING would
// reach that other listener: an exited server is started again on another
// port, up to three times.
func Start(t testing.TB, path string, args ...string) *Server {
	t.Helper()
	for try := 1; ; try++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
		_ = lis.Close()
		kill, exited := Exec(t, path, port, args...)
		s := &Server{Addr: "127.0.0.1:" + port, Kill: kill}
		err = ping(s.Addr, exited)
		if err == nil {
			return s
		}
		kill()
		if !errors.Is(err, errExited) || try == 3 {
			t.Fatalf("redis-server on %s not answering (try %d): %v", s.Addr, try, err)
		}
	}
}

// Exec runs the redis-server at path on port of 127.0.0.1, without
// persistence, in a temporary directory, with args added. It returns a
// func that kills it and waits for it to exit (run at the test's end too)
// and a channel closed once it has exited.
func Exec(t testing.TB, path, port string, args ...string) (kill func(), exited <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(path, append([]string{"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "warning"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server on port %s: %v", port, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-done
		})
	}
	t.Cleanup(kill)
	return kill, done
}

var errExited = errors.New("redis-server exited (its port taken?)")

// ping waits up to 5 s for the redis-server at addr to answer a PING,
// giving up at once when it exits.
func ping(addr string, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			return errExited
		default:
		}
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(end) {
			return err
		}
	}
}
