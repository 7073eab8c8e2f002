//go:build linux

package runtime_test

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT socket option (linux/tcp.h),
// which package syscall does not name.
const tcpUserTimeout = 0x12

// TestAttack27FKeepaliveTimeoutIsTheSocketsTCPUserTimeout: "closing the
// connection after 5 s without an answer (runtime.KeepaliveTimeout, also
// the socket's TCP_USER_TIMEOUT)" (Recommended dial options). A vanished
// host does not acknowledge the ping: it is the kernel's TCP_USER_TIMEOUT
// that gives up on the unacknowledged bytes. The keep-alive test freezes a
// peer whose kernel still acknowledges, and dials with its own values, so
// nothing read the option the channel dialled with DialOptions set. Read
// here from the socket of a connection that carried a call.
func TestAttack27FKeepaliveTimeoutIsTheSocketsTCPUserTimeout(t *testing.T) {
	srv, err := server.Start("127.0.0.1:0", server.Healthy, runtime.ServerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	var mu sync.Mutex
	var conns []*net.TCPConn
	dialer := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c.(*net.TCPConn))
			mu.Unlock()
		}
		return c, err
	})
	cc := dialFault(t, srv.Addr(), dialer)
	if _, err := inventoryv1.NewInventoryServiceClient(cc).GetStock(context.Background(), &inventoryv1.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Fatalf("%d connections dialled, want 1", len(conns))
	}
	raw, err := conns[0].SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var serr error
	if err := raw.Control(func(fd uintptr) { ms, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if got := time.Duration(ms) * time.Millisecond; got != runtime.KeepaliveTimeout {
		t.Errorf("the connection's TCP_USER_TIMEOUT is %v; the README promises runtime.KeepaliveTimeout, %v", got, runtime.KeepaliveTimeout)
	}
}
