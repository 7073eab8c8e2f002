package redisstore

import (
	"net"
	"os/exec"
	"testing"
	"time"
)

// restartRedis kills r and starts a new, empty redis-server on the same
// port: every entry is lost, as after a restart without persistence or a
// failover to a replica that had not received them.
func restartRedis(t *testing.T, r *redisServer) {
	t.Helper()
	r.stop()
	_, port, _ := net.SplitHostPort(r.addr)
	path, _ := exec.LookPath("redis-server")
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("tcp", r.addr)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(end) {
			t.Fatalf("redis-server not back on %s: %v", r.addr, err)
		}
	}
}
