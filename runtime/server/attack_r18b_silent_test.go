package server

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime/policy"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// headersOnly opens n gRPC requests to method over one cleartext HTTP/2
// connection, each sending its headers (no grpc-timeout) and never its
// message. stop ends them.
func headersOnly(t *testing.T, addr, method string, n int) (stop func()) {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var pipes []*io.PipeWriter
	for range n {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+method, pr)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", "application/grpc")
		hr.Header.Set("Te", "trailers")
		wg.Go(func() {
			if resp, err := tr.RoundTrip(hr); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	return func() {
		cancel()
		for _, pw := range pipes {
			pw.Close()
		}
		wg.Wait()
		tr.CloseIdleConnections()
	}
}

// TestAttackR18bRequestThatNeverSendsItsMessage: a caller opens requests
// without a deadline and never sends their message. The tap has admitted
// each (it counts before decoding), so they hold places in flight though
// no handler runs: six of them fill GetStock's limit (high: 6) and an
// ordinary request is shed. With the method's DefaultTimeout (set in the
// tap, on the stream's own context) they end, and their places come back,
// within it; without one, they hold their places until they end (here:
// until the caller goes), as the README says.
func TestAttackR18bRequestThatNeverSendsItsMessage(t *testing.T) {
	for _, timeout := range []time.Duration{300 * time.Millisecond, 0} {
		t.Run("DefaultTimeout "+timeout.String(), func(t *testing.T) {
			srv := &inventoryServer{}
			p := inventoryPolicy()
			p.Methods[0].DefaultTimeout = timeout
			g, client, cc := guarded(t, srv, []*policy.Server{p})
			stop := headersOnly(t, cc.Target(), getStock, 6)
			defer stop()
			eventually(t, "6 silent requests admitted", func() bool { return stats(t, g).InFlight == 6 })
			_, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("an ordinary request while 6 silent ones hold the places: %v, want it shed", err)
			}
			start := time.Now()
			if timeout > 0 {
				eventually(t, "the silent requests' places came back", func() bool { return stats(t, g).InFlight == 0 })
				if el := time.Since(start); el > timeout+500*time.Millisecond {
					t.Errorf("places came back after %s, want within the DefaultTimeout %s and a little", el, timeout)
				}
			} else {
				time.Sleep(300 * time.Millisecond)
				if n := stats(t, g).InFlight; n != 6 {
					t.Errorf("without DefaultTimeout, %d places held after 300ms, want the 6", n)
				}
				stop()
				eventually(t, "places came back when the caller went", func() bool { return stats(t, g).InFlight == 0 })
			}
			if _, err := client.GetStock(ctxTimeout(t, time.Second), &inventoryv1.GetStockRequest{}); err != nil {
				t.Errorf("an ordinary request after the silent ones ended: %v", err)
			}
			if n := srv.getCalls.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
		})
	}
}
