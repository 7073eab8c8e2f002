package redisstore

import (
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// replyProxy is a TCP proxy in front of redis-server for the attack tests.
// Commands always reach Redis; what it does to Redis's replies is the
// fault: lose the next one (the connection is closed when it arrives, so
// Redis carried the command out and the client never learns it), or hold
// every reply for a delay (a slow Redis).
type replyProxy struct {
	lis    net.Listener
	target string

	loseNext atomic.Bool  // close the connection instead of passing on the next reply
	lost     atomic.Int64 // replies lost so far
	delay    atomic.Int64 // nanoseconds each reply is held

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startReplyProxy(t *testing.T, target string) *replyProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyProxy{lis: lis, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = lis.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *replyProxy) addr() string { return p.lis.Addr().String() }

func (p *replyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up, false)
		go p.pipe(up, c, true)
	}
}

func (p *replyProxy) pipe(src, dst net.Conn, replies bool) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if replies {
				if p.loseNext.CompareAndSwap(true, false) {
					p.lost.Add(1)
					return // both ends closed: the reply is gone
				}
				if d := time.Duration(p.delay.Load()); d > 0 {
					time.Sleep(d)
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

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
