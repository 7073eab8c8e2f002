package tcpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves a line echo on loopback and counts the lines it read.
type echo struct {
	addr  string
	mu    sync.Mutex
	lines int
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{addr: lis.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.mu.Lock()
					e.lines++
					e.mu.Unlock()
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return e
}

func (e *echo) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lines
}

// roundTrip sends a line on c and reads the answer within d.
func roundTrip(c net.Conn, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestForwardsStallsCutsRestores(t *testing.T) {
	e := startEcho(t)
	p := Start(t, e.addr)
	c := dial(t, p.Addr())
	if got, err := roundTrip(c, time.Second); err != nil || got != "ping\n" {
		t.Fatalf("forwarding: %q, %v; want the echo", got, err)
	}

	p.Stall()
	before := e.count()
	if got, err := roundTrip(c, 50*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled: %q, %v; want no answer before the deadline", got, err)
	}
	if e.count() != before {
		t.Fatalf("stalled: the target read %d lines, want none", e.count()-before)
	}
	p.Restore()
	if _, err := roundTrip(c, time.Second); err == nil {
		t.Fatal("a connection open while stalled still works after Restore; want it closed")
	}
	c = dial(t, p.Addr())
	if got, err := roundTrip(c, time.Second); err != nil || got != "ping\n" {
		t.Fatalf("restored: %q, %v; want the echo", got, err)
	}

	p.Cut()
	if _, err := roundTrip(c, time.Second); err == nil {
		t.Fatal("a connection survived Cut")
	}
	if _, err := roundTrip(dial(t, p.Addr()), time.Second); err == nil {
		t.Fatal("a new connection worked while cut")
	}
	p.Restore()
	if got, err := roundTrip(dial(t, p.Addr()), time.Second); err != nil || got != "ping\n" {
		t.Fatalf("restored after cut: %q, %v; want the echo", got, err)
	}
}

func TestLosesTheNextReplyAfterTheTargetActed(t *testing.T) {
	e := startEcho(t)
	p := Start(t, e.addr)
	c := dial(t, p.Addr())
	p.LoseNextReply()
	before := e.count()
	if got, err := roundTrip(c, time.Second); err == nil {
		t.Fatalf("got %q; want the reply lost and the connection closed", got)
	}
	if e.count() != before+1 {
		t.Fatalf("the target read %d lines, want 1: the request reaches it, only the reply is lost", e.count()-before)
	}
	if p.Lost() != 1 {
		t.Fatalf("Lost() = %d, want 1", p.Lost())
	}
	if got, err := roundTrip(dial(t, p.Addr()), time.Second); err != nil || got != "ping\n" {
		t.Fatalf("the reply after the lost one: %q, %v; want the echo", got, err)
	}
	if p.Lost() != 1 {
		t.Fatalf("Lost() = %d after a second reply, want still 1", p.Lost())
	}
}

func TestDelaysReplies(t *testing.T) {
	e := startEcho(t)
	p := Start(t, e.addr)
	c := dial(t, p.Addr())
	const d = 60 * time.Millisecond
	p.DelayReplies(d)
	start := time.Now()
	if got, err := roundTrip(c, time.Second); err != nil || got != "ping\n" {
		t.Fatalf("delayed: %q, %v; want the echo", got, err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("the reply took %v, want at least the delay %v", took, d)
	}
	p.DelayReplies(0)
	if got, err := roundTrip(c, d/2); err != nil || got != "ping\n" {
		t.Fatalf("after DelayReplies(0): %q, %v; want the echo within %v", got, err, d/2)
	}
}
