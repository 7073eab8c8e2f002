package redisstore

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/internal/redistest"
	"github.com/go-resilient/resilient/internal/tcpproxy"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// TestMain fails the package's tests if any goroutine they started is still
// running at the end. It silences go-redis's own log, which reports every
// failed dial while the tests cut Redis on purpose.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// redisServer is a real redis-server on a loopback port, started for one
// test. No mock stands in for Redis in these tests.
type redisServer struct {
	addr string
	kill func() // kills the process and waits for it to exit
	once sync.Once
}

// startRedis starts redis-server without persistence, with args added to
// its command line (e.g. "--maxmemory", "4mb"). Without the binary
// the test is skipped, except under CI (CI set), where it fails: .ci/run
// installs it.
func startRedis(t *testing.T, args ...string) *redisServer {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not on PATH, and CI is set: .ci/run installs it (apt-get install redis-server)")
		}
		t.Skip("redis-server not on PATH: the Redis store tests need a real Redis (apt-get install redis-server; .ci/run installs it)")
	}
	srv := redistest.Start(t, path, args...)
	return &redisServer{addr: srv.Addr, kill: srv.Kill}
}

// stop kills the server and waits for it to exit.
func (r *redisServer) stop() { r.once.Do(r.kill) }

// restartRedis kills r and starts a new, empty redis-server on the same
// port: every entry is lost, as after a restart without persistence or a
// failover to a replica that had not received them.
func restartRedis(t *testing.T, r *redisServer) {
	t.Helper()
	r.stop()
	_, port, _ := net.SplitHostPort(r.addr)
	path, _ := exec.LookPath("redis-server")
	redistest.Exec(t, path, port)
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

// client returns a client of addr (the server's, or a proxy's) with
// go-redis's default read timeout (3 s) and without
// ContextTimeoutEnabled: the Guard must bound a silent Redis on its own.
func client(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// warmClient is client(t, addr) with n connections opened (and their
// handshakes sent) before the test slows Redis down: go-redis sends its
// handshake at a connection's first command, so n commands that block
// together open n, each costing round trips of its own.
func warmClient(t *testing.T, addr string, n int) *redis.Client {
	c := client(t, addr)
	redistest.OpenConns(t, c, n)
	return c
}

const (
	inventory    = "example.inventory.v1.InventoryService"
	reserveStock = inventoryv1.InventoryService_ReserveStock_FullMethodName
)

// reserveStockPolicy is the example inventory service's ReserveStock, deduplicated
// with lease and mode, without shedding.
func reserveStockPolicy(lease time.Duration, mode policy.StoreErrorMode) *policy.Server {
	return &policy.Server{
		Name: inventory,
		Methods: []policy.ServerMethod{{Name: reserveStock, Priority: server.PriorityCritical,
			Dedup:       &policy.Dedup{TTL: time.Minute, Lease: lease, OnStoreError: mode},
			NewResponse: func() proto.Message { return new(inventoryv1.ReserveStockResponse) }}},
	}
}

// reserver is an InventoryService whose ReserveStock counts the runs of
// its handler (runs) and the runs that got to commit (commits), and runs
// a hook.
type reserver struct {
	inventoryv1.UnimplementedInventoryServiceServer
	runs, commits atomic.Int64
	hook          func(ctx context.Context, req *inventoryv1.ReserveStockRequest) error
	answer        string
}

func (s *reserver) ReserveStock(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	n := s.runs.Add(1)
	if s.hook != nil {
		if err := s.hook(ctx, req); err != nil {
			return nil, err
		}
	}
	s.commits.Add(1)
	return &inventoryv1.ReserveStockResponse{ReservationId: s.answer + "-" + strconv.FormatInt(n, 10)}, nil
}

// guarded serves srv behind a Guard built with opts and returns the Guard
// and a client.
func guarded(t *testing.T, srv inventoryv1.InventoryServiceServer, p *policy.Server, opts ...server.Option) (*server.Guard, inventoryv1.InventoryServiceClient) {
	t.Helper()
	return guardedBehind(t, srv, p, nil, opts...)
}

// guardedBehind is guarded with outer, unary interceptors outside the
// Guard's (a recovery from panics).
func guardedBehind(t *testing.T, srv inventoryv1.InventoryServiceServer, p *policy.Server, outer []grpc.UnaryServerInterceptor, opts ...server.Option) (*server.Guard, inventoryv1.InventoryServiceClient) {
	t.Helper()
	g, err := server.NewGuard([]*policy.Server{p}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g, serveInventory(t, srv, append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(outer...)}, g.ServerOptions()...)...)
}

// serveInventory serves srv on loopback with the server options opts (a
// Guard's, or several Guards' chained) and returns a client of it; the
// server stops when the test ends.
func serveInventory(t *testing.T, srv inventoryv1.InventoryServiceServer, opts ...grpc.ServerOption) inventoryv1.InventoryServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	inventoryv1.RegisterInventoryServiceServer(s, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		s.Stop()
		<-done
	})
	return inventoryv1.NewInventoryServiceClient(cc)
}

// reserve sends ReserveStock with key, the same body for the same key,
// within d.
func reserve(t *testing.T, c inventoryv1.InventoryServiceClient, key string, d time.Duration) (*inventoryv1.ReserveStockResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, runtime.IdempotencyKeyHeader, key)
	return c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: key, Sku: "a", Units: 1})
}

func stats(t *testing.T, g *server.Guard) server.Stats {
	t.Helper()
	s, ok := g.Stats(inventory)
	if !ok {
		t.Fatal("no stats for", inventory)
	}
	return s
}

// eventually polls cond until it holds or two seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("still not true after 2s: %s", what)
}

// slowStoreRig is a ReserveStock server behind a Guard (lease, refusing on
// store errors) on a real Redis reached through a proxy that can hold its
// replies; the handler takes run, or ends at its context's end with the
// cause's status. Four connections are opened and the scripts loaded
// before the test slows Redis down.
func slowStoreRig(t *testing.T, prefix, answer string, run, lease time.Duration) (*reserver, *tcpproxy.Proxy, *server.Guard, inventoryv1.InventoryServiceClient) {
	t.Helper()
	p := tcpproxy.Start(t, startRedis(t).addr)
	srv := &reserver{answer: answer, hook: func(ctx context.Context, _ *inventoryv1.ReserveStockRequest) error {
		select {
		case <-time.After(run):
			return nil
		case <-ctx.Done():
			return status.FromContextError(context.Cause(ctx)).Err()
		}
	}}
	s := New(warmClient(t, p.Addr(), 4), prefix)
	g, c := guarded(t, srv, reserveStockPolicy(lease, policy.StoreErrorRefuse), server.WithStore(s))
	loadScripts(t, s)
	return srv, p, g, c
}
