package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// h2conn is an HTTP/2 connection spoken frame by frame, not by grpc-go:
// it can end a stream in ways grpc-go's client never does (RST_STREAM
// after the headers alone, after half a message, a TCP close without
// GOAWAY). A goroutine reads the server's frames (acking its SETTINGS and
// PINGs) and records the streams the server ended, until the connection
// closes.
type h2conn struct {
	t    testing.TB
	c    net.Conn
	mu   sync.Mutex
	fr   *http2.Framer
	next uint32
	done chan struct{}

	ended sync.Map // stream id → true once the server ended it (END_STREAM or RST)
}

func dialH2(t testing.TB, addr string) *h2conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	h := &h2conn{t: t, c: c, fr: http2.NewFramer(c, c), next: 1, done: make(chan struct{})}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go h.read()
	t.Cleanup(h.close)
	return h
}

func (h *h2conn) read() {
	defer close(h.done)
	rd := http2.NewFramer(nil, h.c)
	for {
		f, err := rd.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.mu.Lock()
				_ = h.fr.WriteSettingsAck()
				h.mu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				h.mu.Lock()
				_ = h.fr.WritePing(true, f.Data)
				h.mu.Unlock()
			}
		case *http2.RSTStreamFrame:
			h.ended.Store(f.StreamID, true)
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				h.ended.Store(f.StreamID, true)
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				h.ended.Store(f.StreamID, true)
			}
		}
	}
}

// close closes the TCP connection at once (no GOAWAY) and waits for the
// reader.
func (h *h2conn) close() {
	_ = h.c.Close()
	<-h.done
}

// open sends the HEADERS of a gRPC request to method, with extra header
// fields, and returns its stream id. endStream ends the request with its
// headers (no message at all).
func (h *h2conn) open(method string, endStream bool, extra ...string) uint32 {
	h.t.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	fields := append([]string{":method", "POST", ":scheme", "http", ":path", method, ":authority", "localhost",
		"content-type", "application/grpc", "te", "trailers"}, extra...)
	for i := 0; i < len(fields); i += 2 {
		if err := enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}); err != nil {
			h.t.Fatal(err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	h.next += 2
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: endStream}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// data sends b on stream id.
func (h *h2conn) data(id uint32, endStream bool, b []byte) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fr.WriteData(id, endStream, b); err != nil {
		h.t.Fatal(err)
	}
}

// rst resets stream id with CANCEL, as a client that gives up does.
func (h *h2conn) rst(id uint32) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
		h.t.Fatal(err)
	}
}

// goaway sends GOAWAY and then closes the connection.
func (h *h2conn) goaway() {
	h.mu.Lock()
	_ = h.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	h.mu.Unlock()
	h.close()
}

// grpcFrame is msg as a gRPC length-prefixed message.
func grpcFrame(t testing.TB, msg proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

// TestAttack25fEveryRawEndingGivesThePlaceBack: "the place in flight is
// held until the handler returns ... A request that never reaches the
// handler ... gives it back when gRPC cancels the stream's context, which
// it does at every ending of a stream". Requests are sent frame by frame
// and ended the ways a hostile or broken client ends them: RST_STREAM
// after the headers alone, after part of the message, after the whole
// message while the handler runs; headers with END_STREAM and no message;
// a TCP close without GOAWAY with the headers alone and with the handler
// running; GOAWAY then close. The DefaultTimeouts are a minute, so only
// the ending can give the place back. After each, the tap had admitted
// the request (counted), the place is back, and the handler ran exactly
// for the requests whose message arrived whole, and returned.
func TestAttack25fEveryRawEndingGivesThePlaceBack(t *testing.T) {
	srv := &inventoryServer{}
	var running, ran atomic.Int64
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		running.Add(1)
		ran.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	srv.onWatch = func(ctx context.Context) error {
		running.Add(1)
		ran.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	}
	p := inventoryPolicy()
	p.Methods[0].DefaultTimeout = time.Minute
	p.Methods[2].DefaultTimeout = time.Minute
	g, _, cc := guarded(t, srv, []*policy.Server{p})
	addr := cc.Target()
	msg := grpcFrame(t, &inventoryv1.GetStockRequest{Sku: "sku-with-a-long-enough-name"})
	watch := grpcFrame(t, &inventoryv1.WatchStockRequest{Sku: "w"})

	admittedAll := func() uint64 {
		var n uint64
		for _, a := range stats(t, g).Admitted {
			n += a
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		handler bool // the message arrives whole: the handler runs
		run     func(h *h2conn) (end func())
	}{
		{"headers, then RST", false, func(h *h2conn) func() {
			id := h.open(getStock, false)
			return func() { h.rst(id) }
		}},
		{"half a message, then RST", false, func(h *h2conn) func() {
			id := h.open(getStock, false)
			h.data(id, false, msg[:len(msg)/2])
			return func() { h.rst(id) }
		}},
		{"a length prefix and nothing, then RST", false, func(h *h2conn) func() {
			id := h.open(getStock, false)
			h.data(id, false, msg[:5])
			return func() { h.rst(id) }
		}},
		{"the message whole, RST while the handler runs", true, func(h *h2conn) func() {
			id := h.open(getStock, false)
			h.data(id, true, msg)
			return func() { h.rst(id) }
		}},
		{"the message whole without END_STREAM (gRPC waits for it before the handler), then RST", false, func(h *h2conn) func() {
			id := h.open(getStock, false)
			h.data(id, false, msg)
			return func() { h.rst(id) }
		}},
		{"a stream's request, RST while it runs", true, func(h *h2conn) func() {
			id := h.open(watchStock, false)
			h.data(id, true, watch)
			return func() { h.rst(id) }
		}},
		{"a stream's headers alone, then RST", false, func(h *h2conn) func() {
			id := h.open(watchStock, false)
			return func() { h.rst(id) }
		}},
		{"headers with END_STREAM, no message", false, func(h *h2conn) func() {
			h.open(getStock, true)
			return func() {}
		}},
		{"a stream's headers with END_STREAM, no message", false, func(h *h2conn) func() {
			h.open(watchStock, true)
			return func() {}
		}},
		{"headers, then TCP close", false, func(h *h2conn) func() {
			h.open(getStock, false)
			return h.close
		}},
		{"the message whole, TCP close while the handler runs", true, func(h *h2conn) func() {
			id := h.open(getStock, false)
			h.data(id, true, msg)
			return h.close
		}},
		{"a stream running, TCP close", true, func(h *h2conn) func() {
			id := h.open(watchStock, false)
			h.data(id, true, watch)
			return h.close
		}},
		{"headers, then GOAWAY and close", false, func(h *h2conn) func() {
			h.open(getStock, false)
			return h.goaway
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, ranBefore := admittedAll(), ran.Load()
			h := dialH2(t, addr)
			end := tc.run(h)
			eventually(t, "the tap admitted the request", func() bool { return admittedAll() == before+1 })
			if tc.handler {
				eventually(t, "the handler runs", func() bool { return running.Load() == 1 })
			}
			if n := stats(t, g).InFlight; n != 1 && !(n == 0 && !tc.handler && endsAtOnce(tc.name)) {
				t.Fatalf("%d in flight while the request is open, want 1", n)
			}
			end()
			eventually(t, "the place given back and the handler returned", func() bool {
				return stats(t, g).InFlight == 0 && running.Load() == 0
			})
			if got, want := ran.Load()-ranBefore, map[bool]int64{false: 0, true: 1}[tc.handler]; got != want {
				t.Errorf("the handler ran %d times, want %d", got, want)
			}
			h.close()
		})
	}
	if s := stats(t, g); s.InFlight != 0 || s.Shed != [5]uint64{} {
		t.Errorf("at the end: %+v; want nothing in flight and nothing shed", s)
	}
}

// endsAtOnce: the requests that end with their headers (END_STREAM, no
// message), whose place may be back before the test looks.
func endsAtOnce(name string) bool {
	return bytes.Contains([]byte(name), []byte("END_STREAM, no message"))
}

// TestAttack25fResetsRacingTheDoor: 300 requests on one raw connection,
// each reset right after its headers, after half its message or after
// all of it (the RST racing the tap, the decoding, the interceptor's
// taking of the place and the handler's start), with handlers that return
// at once and ones that wait for their context. The shedding limits (2 to
// 8) are reached on the way. Every request is counted once, admitted or
// shed; when they are over nothing is in flight and no handler runs.
func TestAttack25fResetsRacingTheDoor(t *testing.T) {
	srv := &inventoryServer{}
	var running atomic.Int64
	srv.onGet = func(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
		running.Add(1)
		defer running.Add(-1)
		if req.GetSku() == "wait" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &inventoryv1.GetStockResponse{}, nil
	}
	p := inventoryPolicy()
	p.Methods[0].DefaultTimeout = time.Minute
	g, _, cc := guarded(t, srv, []*policy.Server{p})
	h := dialH2(t, cc.Target())
	msgs := [][]byte{grpcFrame(t, &inventoryv1.GetStockRequest{Sku: "wait"}), grpcFrame(t, &inventoryv1.GetStockRequest{Sku: "now"})}
	prios := []string{"low", "normal", "high", "critical"}
	const n = 300
	for i := range n {
		id := h.open(getStock, false, PriorityHeader, prios[i%4])
		m := msgs[i%2]
		switch i % 3 {
		case 1:
			h.data(id, false, m[:len(m)/2])
		case 2:
			h.data(id, true, m)
		}
		h.rst(id)
	}
	var total uint64
	eventually(t, "every request counted, admitted or shed", func() bool {
		s := stats(t, g)
		total = 0
		for q := range s.Admitted {
			total += s.Admitted[q] + s.Shed[q]
		}
		return total == n
	})
	eventually(t, "nothing in flight, no handler running", func() bool {
		return stats(t, g).InFlight == 0 && running.Load() == 0
	})
	s := stats(t, g)
	if s.Admitted[PriorityCritical] != 0 || s.Shed[PriorityCritical] != 0 {
		t.Errorf("critical claimed on a high method was granted critical: %+v", s)
	}
	if s.Admitted[PriorityHigh]+s.Shed[PriorityHigh] != n/2 {
		t.Errorf("high and critical claims: %d admitted, %d shed as high, want %d", s.Admitted[PriorityHigh], s.Shed[PriorityHigh], n/2)
	}
	// The connection still serves, and the limit is whole.
	h.close()
	client := inventoryv1.NewInventoryServiceClient(cc)
	for range 8 {
		if _, err := client.GetStock(ctxTimeout(t, 5*time.Second), &inventoryv1.GetStockRequest{Sku: "now"}); err != nil {
			t.Fatalf("a request after the resets: %v", err)
		}
	}
}
