package runtime_test

// Attacks on the README's Streams endings when the connection itself ends
// the streams: a proxy between that cuts every connection, a server that
// sends GOAWAY (GracefulStop) and then stops with streams open, and a
// server stopped outright. A stream of each kind (server, client, bidi) is
// open and hung, with its caller blocked in RecvMsg, blocked in SendMsg on
// flow control, or not in any call; after the cut each must have its
// permit back, be counted once, and the breaker must be told a failure
// (UNAVAILABLE, a dependency's) or nothing, never two outcomes.

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// atk24eServerProxied serves the three methods of atk24eServer behind a
// tcpproxy and dials the proxy; it returns the server too.
func atk24eServerProxied(t *testing.T) (*grpc.Server, *tcpproxy.Proxy, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
	w, u, c := atk24eWatchDesc, atk24eUploadDesc, atk24eChatDesc
	w.Handler, u.Handler, c.Handler = atk24eServe("watch"), atk24eServe("upload"), atk24eServe("chat")
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk24e.S", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{w, u, c}}, struct{}{})
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(lis) }()
	p := tcpproxy.Start(t, lis.Addr().String())
	cc, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
		<-served
	})
	return gs, p, cc
}

func TestAttack24eStreamsEndedByTheConnection(t *testing.T) {
	atkNoLeak(t)
	for _, end := range []string{"proxy cut", "GracefulStop then Stop", "Stop"} {
		for _, caller := range []string{"in Recv", "in Send", "in no call, reads after"} {
			t.Run(end+"/"+caller, func(t *testing.T) {
				gs, p, cc := atk24eServerProxied(t)
				rt, conn, reg := atk24eClient(t, cc, 30*time.Second)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				methods := []string{atk24eWatch, atk24eUpload, atk24eChat}
				if caller == "in Send" {
					methods = []string{atk24eUpload, atk24eChat}
				}
				streams := map[string]grpc.ClientStream{}
				for _, m := range methods {
					cs, err := atk24eOpen(ctx, conn, m, "hang")
					if err != nil {
						t.Fatalf("%s: %v", m, err)
					}
					streams[m] = cs
				}
				// Each stream's header and first message reached the server
				// before the cut: wait until the server holds all of them.
				time.Sleep(50 * time.Millisecond)
				var wg sync.WaitGroup
				seen := map[string]error{}
				var mu sync.Mutex
				for m, cs := range streams {
					if caller == "in no call, reads after" {
						continue
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						var err error
						if caller == "in Recv" {
							err = atk24eRecvAll(cs)
						} else {
							big := wrapperspb.String(strings.Repeat("s", 8<<10))
							for err == nil {
								err = cs.SendMsg(big)
							}
							if err == io.EOF {
								err = atk24eRecvAll(cs) // the status
							}
						}
						mu.Lock()
						seen[m] = err
						mu.Unlock()
					}()
				}
				time.Sleep(50 * time.Millisecond) // the callers are blocked now
				switch end {
				case "proxy cut":
					p.Cut()
				case "GracefulStop then Stop":
					stopped := make(chan struct{})
					go func() { defer close(stopped); gs.GracefulStop() }()
					time.Sleep(50 * time.Millisecond) // GOAWAY sent; the hung handlers keep it waiting
					gs.Stop()
					<-stopped
				case "Stop":
					gs.Stop()
				}
				wg.Wait()
				if caller == "in no call, reads after" {
					for m, cs := range streams {
						seen[m] = atk24eRecvAll(cs)
					}
				}
				for m, err := range seen {
					if status.Code(err) != codes.Unavailable {
						t.Errorf("%s: the caller saw %v, want UNAVAILABLE", atk24eShort(m), err)
					}
					if n := atkInUse(t, rt, m); n != 0 {
						t.Errorf("%s: %d permits taken once the caller saw the end", atk24eShort(m), n)
					}
					time.Sleep(10 * time.Millisecond)
					if got := atk24eAttempts(t, reg, m); len(got) != 1 || got["UNAVAILABLE"] != 1 {
						t.Errorf("%s: attempts_total %v, want one under UNAVAILABLE", atk24eShort(m), got)
					}
					atkWantBreaker(t, rt, m, runtime.StateOpen, atk24eShort(m)+": breaker %v, want open by the failure")
				}
			})
		}
	}
}

// A message past the server's receive limit is answered RESOURCE_EXHAUSTED
// "grpc: received message larger than max": the limit is configuration,
// not the dependency's load, so the stream's end tells the breaker nothing
// (one failure would open it here), counts once, and gives the permit
// back at once, for a stream of each kind.
func TestAttack24eStreamPastTheServersReceiveLimit(t *testing.T) {
	atkNoLeak(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(1 << 10))
	w, u, c := atk24eWatchDesc, atk24eUploadDesc, atk24eChatDesc
	w.Handler, u.Handler, c.Handler = atk24eServe("watch"), atk24eServe("upload"), atk24eServe("chat")
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "atk24e.S", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{w, u, c}}, struct{}{})
	cc := serveAndDial(t, gs, lis)
	// RESOURCE_EXHAUSTED is a failure code here: a server shedding load.
	rt, conn, reg := atk24eClientCodes(t, cc, 30*time.Second, policy.CodesOf(codes.Unavailable, codes.ResourceExhausted))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, m := range []string{atk24eWatch, atk24eUpload, atk24eChat} {
		cs, err := atk24eOpen(ctx, conn, m, strings.Repeat("L", 4<<10))
		if err == nil {
			if m != atk24eWatch {
				_ = cs.CloseSend()
			}
			err = atk24eRecvAll(cs)
		}
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") {
			t.Errorf("%s: %v, want the server's RESOURCE_EXHAUSTED larger than max", atk24eShort(m), err)
		}
		if n := atkInUse(t, rt, m); n != 0 {
			t.Errorf("%s: %d permits after the refusal", atk24eShort(m), n)
		}
		if got := atk24eAttempts(t, reg, m); len(got) != 1 || got["RESOURCE_EXHAUSTED"] != 1 {
			t.Errorf("%s: attempts_total %v, want one under RESOURCE_EXHAUSTED", atk24eShort(m), got)
		}
		atkWantBreaker(t, rt, m, runtime.StateClosed, atk24eShort(m)+": breaker %v, want closed")
	}
}
