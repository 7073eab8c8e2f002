package example_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/redistest"
	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime"
	rserver "github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/redisstore"
)

const inventoryName = "example.inventory.v1.InventoryService"

// e2eRedis starts a real redis-server on a loopback port for one test and
// returns a go-redis client of it (no mock stands in for Redis). Without
// the binary the test is skipped, except under CI, where it fails.
func e2eRedis(t *testing.T) *redis.Client {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not on PATH, and CI is set: .ci/run installs it")
		}
		t.Skip("redis-server not on PATH: these end-to-end tests need a real Redis")
	}
	srv := redistest.Start(t, path)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	// Open the connections of redisConns callers at once before the test:
	// otherwise concurrent claims each dial their own, inside the Guard's
	// 500 ms StoreTimeout, and on a loaded machine the dials use it up
	// (eight concurrent claims of one order were refused as the store not
	// answering in time at load 13, and the handler never ran).
	redistest.OpenConns(t, rdb, redisConns)
	return rdb
}

// redisConns is how many connections e2eRedis opens up front: more than
// the test with the most concurrent keyed calls makes (eight).
const redisConns = 12

// rig is the example inventory service behind its Guard (Redis dedup),
// reached by its generated resilient client through a TCP proxy that
// injects the network's faults.
type rig struct {
	srv    *server.Server
	guard  *rserver.Guard
	proxy  *tcpproxy.Proxy
	cc     *grpc.ClientConn
	client *inventoryv1.InventoryServiceResilientClient
}

// newRig serves the example with behaviour b under the Guard built with
// guardOpts (the Redis store first), and builds the generated client with
// clientOpts, dialled through a proxy.
func newRig(t *testing.T, b server.Behaviour, guardOpts []rserver.Option, clientOpts ...runtime.Option) *rig {
	t.Helper()
	r, _ := newRigDialled(t, b, guardOpts, nil, clientOpts...)
	return r
}

// newRigDialled is newRig on a connection dialled with dialOpts too, and
// returns the Redis client its store writes with.
func newRigDialled(t *testing.T, b server.Behaviour, guardOpts []rserver.Option, dialOpts []grpc.DialOption,
	clientOpts ...runtime.Option) (*rig, *redis.Client) {
	t.Helper()
	rdb := e2eRedis(t)
	g, err := server.NewGuard(append([]rserver.Option{rserver.WithStore(redisstore.New(rdb, "e2e:"))}, guardOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	// Stop waits for the handlers too: a keyed handler may still be
	// writing its outcome to a store the test made slow when the test
	// ends, and would outlive it (the package's leak check).
	srv, err := server.Start("127.0.0.1:0", b, append(g.ServerOptions(), grpc.WaitForHandlers(true))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	p := tcpproxy.Start(t, srv.Addr())
	cc, c := dialInventory(t, p.Addr(), dialOpts, clientOpts...)
	return &rig{srv: srv, guard: g, proxy: p, cc: cc, client: c}, rdb
}

func dialInventory(t *testing.T, addr string, dialOpts []grpc.DialOption, clientOpts ...runtime.Option) (*grpc.ClientConn, *inventoryv1.InventoryServiceResilientClient) {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dialOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: clientOpts})
	if err != nil {
		t.Fatal(err)
	}
	return cc, c
}

// newBareRig serves the example with behaviour b and no Guard, and builds
// the generated client with clientOpts, dialled directly.
func newBareRig(t *testing.T, b server.Behaviour, clientOpts ...runtime.Option) *rig {
	t.Helper()
	srv, err := server.Start("127.0.0.1:0", b, grpc.WaitForHandlers(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cc, c := dialInventory(t, srv.Addr(), nil, clientOpts...)
	return &rig{srv: srv, cc: cc, client: c}
}

// stats is the Guard's counts of the inventory service.
func (r *rig) stats() rserver.Stats {
	s, _ := r.guard.Stats(inventoryName)
	return s
}

// warm makes one call so that the connection is up and the proxy's next
// bytes from the server are a reply, not the connection's preface. The
// connection is made first, and the call is the plain client's on the
// same connection with 10 s: a loaded machine's dial, or the call itself,
// may use up the annotated 300 ms timeout (at load 13 it did), and the
// warm-up is not what any test times.
func (r *rig) warm(t *testing.T) {
	t.Helper()
	readyConn(t, r.cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := inventoryv1.NewInventoryServiceClient(r.cc).StockReport(ctx, &inventoryv1.StockReportRequest{Warehouse: "warm"}); err != nil {
		t.Fatalf("warm-up call: %v", err)
	}
}
