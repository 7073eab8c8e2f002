package faultserver_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const getStock = inventoryv1.InventoryService_GetStock_FullMethodName

func dial(t *testing.T, addr string) inventoryv1.InventoryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return inventoryv1.NewInventoryServiceClient(cc)
}

func get(c inventoryv1.InventoryServiceClient, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "a"}, opts...)
	return err
}

func TestPerCallCountsAcrossRestarts(t *testing.T) {
	s, err := faultserver.Start(faultserver.PerCall(server.Fail(codes.Unavailable), server.Fail(codes.NotFound), server.Healthy))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := dial(t, s.Addr())
	if err := get(c); status.Code(err) != codes.Unavailable {
		t.Fatalf("call 1: %v, want UNAVAILABLE", err)
	}
	if err := s.Restart(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The channel reconnects after its backoff; wait for it.
	deadline := time.Now().Add(5 * time.Second)
	err = get(c)
	for status.Code(err) == codes.Unavailable && s.Calls(getStock) == 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		err = get(c)
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("call 2, after the restart: %v, want NOT_FOUND (PerCall counts across restarts)", err)
	}
	if err := get(c); err != nil {
		t.Fatalf("call 3: %v, want success", err)
	}
	if got := s.Calls(getStock); got != 3 {
		t.Errorf("Calls = %d over two incarnations, want 3", got)
	}
	if s.Accepted() < 2 {
		t.Errorf("Accepted = %d, want a connection per incarnation", s.Accepted())
	}
}

func TestDownRefusesAndUpServesOnTheSamePort(t *testing.T) {
	s, err := faultserver.Start(server.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	s.Down()
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while down: %v, want connection refused", err)
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if err := get(dial(t, s.Addr())); err != nil {
		t.Fatalf("after Up: %v", err)
	}
}

func TestRefusedAndSilent(t *testing.T) {
	addr, err := faultserver.Refused()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}

	silent, err := faultserver.ListenSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	nc, err := net.DialTimeout("tcp", silent.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := nc.Read(make([]byte, 1)); n != 0 || !errors.Is(err, errors.Unwrap(err)) || !isTimeout(err) {
		t.Fatalf("read from the silent server: %d bytes, %v; want nothing until the deadline", n, err)
	}
	if silent.Accepted() != 1 {
		t.Errorf("Accepted = %d, want 1", silent.Accepted())
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestResetBreaksTheCallInFlight(t *testing.T) {
	s, err := faultserver.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	s.SetBehaviour(faultserver.PerCall(s.Reset(), server.Healthy))
	c := dial(t, s.Addr())
	if err := get(c); status.Code(err) != codes.Unavailable {
		t.Fatalf("call during the reset: %v, want UNAVAILABLE", err)
	}
	if err := get(c); err != nil {
		t.Fatalf("the next call, on a new connection: %v", err)
	}
	// The server's handler learns of the reset from its context, on its own
	// goroutine, possibly after the client has already seen the break.
	for deadline := time.Now().Add(2 * time.Second); s.Cancelled(getStock) != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Cancelled(getStock) != 1 {
		t.Errorf("Cancelled = %d, want 1: the reset call ended on the server too", s.Cancelled(getStock))
	}
}

func TestPushbackTrailer(t *testing.T) {
	s, err := faultserver.Start(faultserver.Pushback(codes.Unavailable, 250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var trailer metadata.MD
	err = get(dial(t, s.Addr()), grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want UNAVAILABLE", err)
	}
	if got := trailer.Get(faultserver.PushbackHeader); len(got) != 1 || got[0] != "250" {
		t.Errorf("trailer %s = %q, want [250]", faultserver.PushbackHeader, got)
	}
}

// A restart still running when the server is stopped does not bring it up
// again: nothing listens on its port after Stop, whatever came first.
func TestStopIsForGood(t *testing.T) {
	s, err := faultserver.Start(server.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() { restarted <- s.Restart(100 * time.Millisecond) }()
	time.Sleep(20 * time.Millisecond) // the restart is down, sleeping
	s.Stop()
	if err := <-restarted; err == nil || !strings.Contains(err.Error(), "stopped for good") {
		t.Errorf("a restart across Stop: %v, want it refused as stopped for good", err)
	}
	if err := s.Up(); err == nil {
		t.Error("Up after Stop served again")
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Errorf("%s accepts connections after Stop", s.Addr())
	}
}
