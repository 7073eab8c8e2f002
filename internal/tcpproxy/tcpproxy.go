// Package tcpproxy is a TCP proxy for tests that put a network fault
// between a client and a real server on loopback: it cuts (closes every
// connection and refuses new ones), stalls (keeps the connections open and
// forwards nothing either way), loses the next reply (closes the
// connection when the server's next bytes arrive, after the server has
// acted on the request) or holds every reply for a delay, and restores.
// It is test support only: Start takes a testing.TB and stops the proxy in
// its Cleanup.
package tcpproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards the connections it accepts to a target address, with the
// fault set last. The zero fault is forwarding.
type Proxy struct {
	lis    net.Listener
	target string

	mode     atomic.Int32 // forwarding, cut or stalled
	loseNext atomic.Bool  // close the connection instead of passing on the next reply
	lost     atomic.Int64 // replies lost so far
	delay    atomic.Int64 // nanoseconds each reply is held

	mu    sync.Mutex // held while a connection is accepted, so a Cut cannot miss it
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

const (
	forwarding = iota
	cut
	stalled
)

// Start listens on a loopback port and forwards to target until the test
// ends; the test's Cleanup closes the listener and every connection and
// waits for the proxy's goroutines.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{lis: lis, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = lis.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

// Addr is the address clients dial instead of the target's.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Cut closes every connection and refuses new ones (accepts and closes
// them) until Restore.
func (p *Proxy) Cut() {
	p.mode.Store(cut)
	p.closeAll()
}

// Stall keeps the connections open and accepts new ones, reading and
// dropping what either side sends, until Restore: a peer that does not
// answer.
func (p *Proxy) Stall() { p.mode.Store(stalled) }

// Restore forwards again. The connections open while stalled or cut are
// closed: the bytes they dropped would leave their clients out of step.
func (p *Proxy) Restore() {
	if p.mode.Swap(forwarding) != forwarding {
		p.closeAll()
	}
}

// LoseNextReply makes the proxy close the connection on which the target's
// next bytes arrive instead of passing them on: the target carried the
// request out and the client never learns it.
func (p *Proxy) LoseNextReply() { p.loseNext.Store(true) }

// Lost is how many replies LoseNextReply has lost so far.
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// DelayReplies holds every read of the target's bytes for d before passing
// it on (a slow target); 0 stops the delay.
func (p *Proxy) DelayReplies(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mode.Load() == cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, up, false)
		go p.pipe(up, c, true)
	}
}

// pipe copies src to dst, dropping what it reads unless forwarding;
// replies marks the target-to-client direction, where the reply faults
// apply.
func (p *Proxy) pipe(src, dst net.Conn, replies bool) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.mode.Load() == forwarding {
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

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}
