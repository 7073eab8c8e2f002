package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
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
