package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/runtime/server/internal/testpb"
)

// redisServer is a real redis-server on a loopback port, started for one
// test. No mock stands in for Redis in these tests.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// startRedis starts redis-server without persistence. Without the binary
// the test is skipped, except under CI (CI set), where it fails: .ci/run
// installs it.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not on PATH, and CI is set: .ci/run installs it (apt-get install redis-server)")
		}
		t.Skip("redis-server not on PATH: the Redis store tests need a real Redis (apt-get install redis-server; .ci/run installs it)")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	_ = lis.Close()
	r := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	r.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "warning")
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(r.stop)
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	defer c.Close()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return r
		}
		if time.Now().After(end) {
			t.Fatalf("redis-server on %s not answering: %v", r.addr, err)
		}
	}
}

// stop kills the server and waits for it to exit.
func (r *redisServer) stop() {
	r.once.Do(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
}

func (r *redisServer) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.addr, DialTimeout: 200 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRedisStore(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	s := NewRedisStore(r.client(t), "test:")
	c, err := s.Claim(ctx, "a", "t1", time.Second)
	if err != nil || c.State != Claimed {
		t.Fatalf("first claim: %+v %v", c, err)
	}
	if c, err := s.Claim(ctx, "a", "t2", time.Second); err != nil || c.State != Pending {
		t.Fatalf("second claim: %+v %v", c, err)
	}
	if err := s.Renew(ctx, "a", "t2", time.Second); !errors.Is(err, ErrNotOwner) {
		t.Errorf("a non-owner renewed: %v", err)
	}
	if err := s.Complete(ctx, "a", "t2", Outcome{Response: []byte("no")}, time.Minute); !errors.Is(err, ErrNotOwner) {
		t.Errorf("a non-owner completed: %v", err)
	}
	if err := s.Release(ctx, "a", "t2"); err != nil {
		t.Error(err)
	}
	if err := s.Renew(ctx, "a", "t1", time.Second); err != nil {
		t.Error(err)
	}
	resp := []byte{0, 1, 2, 0xff} // any bytes, NUL included
	if err := s.Complete(ctx, "a", "t1", Outcome{Response: resp}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "a", "t3", time.Second); err != nil || c.State != Done || string(c.Outcome.Response) != string(resp) {
		t.Fatalf("claim of a done key: %+v %v", c, err)
	}
	if err := s.Release(ctx, "a", "t1"); err != nil {
		t.Error(err)
	}
	if c, _ := s.Claim(ctx, "a", "t3", time.Second); c.State != Done {
		t.Error("release by the former owner deleted the done entry")
	}
	st := status.New(codes.FailedPrecondition, "no stock").Proto()
	_, _ = s.Claim(ctx, "b", "tb", time.Second)
	if err := s.Complete(ctx, "b", "tb", Outcome{Status: st}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Claim(ctx, "b", "x", time.Second); c.State != Done || c.Outcome.Status.GetMessage() != "no stock" {
		t.Errorf("stored status: %+v", c)
	}
	// A lapsed lease: the key is free again, and the old owner can neither
	// complete nor release the new owner's entry.
	_, _ = s.Claim(ctx, "c", "old", 30*time.Millisecond)
	time.Sleep(60 * time.Millisecond)
	if c, _ := s.Claim(ctx, "c", "new", time.Second); c.State != Claimed {
		t.Fatalf("claim after the lease lapsed: %+v", c)
	}
	if err := s.Complete(ctx, "c", "old", Outcome{}, time.Minute); !errors.Is(err, ErrNotOwner) {
		t.Errorf("old owner completed: %v", err)
	}
	_ = s.Release(ctx, "c", "old")
	if c, _ := s.Claim(ctx, "c", "x", time.Second); c.State != Pending {
		t.Errorf("old owner released the new owner's key: %+v", c)
	}
	// Done entries expire after their TTL.
	_, _ = s.Claim(ctx, "d", "td", time.Second)
	_ = s.Complete(ctx, "d", "td", Outcome{Response: []byte("x")}, 30*time.Millisecond)
	time.Sleep(60 * time.Millisecond)
	if c, _ := s.Claim(ctx, "d", "x", time.Second); c.State != Claimed {
		t.Errorf("done entry outlived its TTL: %+v", c)
	}
}

// TestRedisTwoReplicasRunOnce: two servers sharing one Redis, each with
// its own Redis client, receive concurrent duplicates of several keys: the
// handler runs exactly once per key, across both.
func TestRedisTwoReplicasRunOnce(t *testing.T) {
	r := startRedis(t)
	var runs sync.Map // key → *atomic.Int64
	slow := func(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
		n, _ := runs.LoadOrStore(req.GetOrderId(), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		time.Sleep(50 * time.Millisecond)
		return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
	}
	p := inventoryPolicy()
	p.Shedding = nil
	var clients [2]inventoryv1.InventoryServiceClient
	var servers [2]*inventoryServer
	for i := range 2 {
		servers[i] = &inventoryServer{onReserve: slow}
		_, clients[i], _ = guarded(t, servers[i], []*ServicePolicy{p}, WithStore(NewRedisStore(r.client(t), "replicas:")))
	}
	const keys, perKey = 5, 8
	var wg sync.WaitGroup
	for k := range keys {
		for i := range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("o-%d", k)
				resp, err := reserve(t, clients[i%2], key)
				if err != nil {
					t.Error(err)
				} else if resp.GetReservationId() != "r-"+key {
					t.Errorf("key %s answered %s", key, resp.GetReservationId())
				}
			}()
		}
	}
	wg.Wait()
	// And a sequential repeat on each replica.
	for i := range 2 {
		if _, err := reserve(t, clients[i], "o-0"); err != nil {
			t.Error(err)
		}
	}
	total := servers[0].reserveCalls.Load() + servers[1].reserveCalls.Load()
	if total != keys {
		t.Errorf("handler ran %d times for %d keys × %d duplicates on two replicas, want %d", total, keys, perKey+0, keys)
	}
	runs.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 1 {
			t.Errorf("key %v ran %d times", k, n)
		}
		return true
	})
}

// TestRedisStoppedMidTest: with Redis gone, Refuse answers UNAVAILABLE
// without running the handler; RunWithoutDedup runs it.
func TestRedisStoppedMidTest(t *testing.T) {
	for _, mode := range []StoreErrorMode{Refuse, RunWithoutDedup} {
		t.Run(mode.String(), func(t *testing.T) {
			r := startRedis(t)
			srv := &inventoryServer{}
			p := inventoryPolicy()
			p.Methods[1].Dedup.OnStoreError = mode
			g, client, _ := guarded(t, srv, []*ServicePolicy{p}, WithStore(NewRedisStore(r.client(t), "stop:")))
			for range 2 {
				if _, err := reserve(t, client, "before"); err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.reserveCalls.Load(); n != 1 {
				t.Fatalf("handler ran %d times before the stop, want 1", n)
			}
			r.stop()
			_, err := reserve(t, client, "after")
			switch mode {
			case Refuse:
				if status.Code(err) != codes.Unavailable {
					t.Errorf("with Redis stopped: %v, want UNAVAILABLE", err)
				}
				if n := srv.reserveCalls.Load(); n != 1 {
					t.Errorf("handler ran %d times, want still 1", n)
				}
			case RunWithoutDedup:
				if err != nil {
					t.Errorf("with Redis stopped: %v, want the handler's answer", err)
				}
				if n := srv.reserveCalls.Load(); n != 2 {
					t.Errorf("handler ran %d times, want 2", n)
				}
			}
			if s := stats(t, g); s.StoreErrors == 0 {
				t.Error("store errors not counted")
			}
		})
	}
}
