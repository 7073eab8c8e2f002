package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// rawCall is a gRPC call made by hand over cleartext HTTP/2 with net/http,
// not grpc-go, so that it can send metadata grpc-go refuses to send (bytes
// outside printable ASCII). It returns the response message's bytes, the
// status code and message from the trailers.
func rawCall(t testing.TB, addr, method string, req proto.Message, timeout time.Duration, md http.Header) ([]byte, codes.Code, string) {
	t.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 5, 5+len(body))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(body)))
	frame = append(frame, body...)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+method, bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range md {
		hr.Header[k] = vs
	}
	hr.Header.Set("Content-Type", "application/grpc")
	hr.Header.Set("Te", "trailers")
	if hr.Header.Get("Grpc-Timeout") == "" {
		hr.Header.Set("Grpc-Timeout", strconv.FormatInt(timeout.Milliseconds(), 10)+"m")
	}
	resp, err := tr.RoundTrip(hr)
	if err != nil {
		t.Fatalf("raw call %s: %v", method, err)
	}
	defer resp.Body.Close()
	all, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("raw call %s: reading the body: %v", method, err)
	}
	var msg []byte
	if len(all) >= 5 {
		n := binary.BigEndian.Uint32(all[1:5])
		msg = all[5 : 5+n]
	}
	st := resp.Trailer.Get("Grpc-Status")
	if st == "" { // a trailers-only answer
		st = resp.Header.Get("Grpc-Status")
		return msg, codeOf(t, st), resp.Header.Get("Grpc-Message")
	}
	return msg, codeOf(t, st), resp.Trailer.Get("Grpc-Message")
}

func codeOf(t testing.TB, s string) codes.Code {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("grpc-status %q", s)
	}
	return codes.Code(n)
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// tcpProxy sits between a gRPC client and server: it cuts (closes every
// connection and refuses new ones), stalls (keeps them open, forwards
// nothing) and restores.
type tcpProxy struct {
	lis    net.Listener
	target string
	mode   atomic.Int32 // proxyForward, proxyCut, proxyStall

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

const (
	proxyForward = iota
	proxyCut
	proxyStall
)

func startTCPProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{lis: lis, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			if p.mode.Load() == proxyCut {
				_ = c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(c, up)
			go p.pipe(up, c)
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) addr() string { return p.lis.Addr().String() }

func (p *tcpProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.mode.Load() == proxyForward {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *tcpProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) cut()   { p.mode.Store(proxyCut); p.closeAll() }
func (p *tcpProxy) stall() { p.mode.Store(proxyStall) }
func (p *tcpProxy) restore() {
	if p.mode.Swap(proxyForward) != proxyForward {
		p.closeAll()
	}
}
