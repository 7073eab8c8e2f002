package override_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/internal/faultserver"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestAttackR18tDescribeIsWhatRuns builds the example's InventoryService
// client from its policy with a file, a variable over the file and a
// WithPolicy edit after both, reads the values Describe says are in force
// and the sources Changes names, and measures each on a loopback server:
// the attempts StockReport makes against UNAVAILABLE, the time its
// per-attempt timeout ends a hung call in, and how many hung calls the
// shared bulkhead lets reach the server at once.
func TestAttackR18tDescribeIsWhatRuns(t *testing.T) {
	const svcEnv = "RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__"
	file := []byte(`services:
  example.inventory.v1.InventoryService:
    bulkhead: {permits: 5, max_wait: 5ms}
    methods:
      StockReport:
        timeout: 900ms
        retry: {max_attempts: 4, initial_backoff: 1ms, max_backoff: 2ms}
`)
	env := []string{
		svcEnv + "METHODS__STOCKREPORT__TIMEOUT=60ms", // over the file's 900ms
		svcEnv + "METHODS__STOCKREPORT__RETRY__MAX_ATTEMPTS=3",
	}
	c, fs, _ := r18tClient(t, "overrides.yaml", file, env, func(p *policy.Service) { p.Bulkhead.Permits = 2 })
	desc := c.Runtime().Describe()

	// What Describe says, read from its lines.
	num := func(re string) int { t.Helper(); return describedNum(t, desc, re) }
	permits := num(`(?m)^  bulkhead \(shared\): permits (\d+),`)
	para := desc[strings.Index(desc, "  /example.inventory.v1.InventoryService/StockReport\n"):]
	if i := strings.Index(para[3:], "\n  /"); i > 0 {
		para = para[:i+3]
	}
	tm := regexp.MustCompile(`timeout: (\S+?)[,\n]`).FindStringSubmatch(para)
	am := regexp.MustCompile(`retry: max_attempts (\d+)`).FindStringSubmatch(para)
	if tm == nil || am == nil {
		t.Fatalf("StockReport's paragraph lacks its timeout or retry:\n%s", para)
	}
	timeout, err := time.ParseDuration(tm[1])
	if err != nil {
		t.Fatal(err)
	}
	attempts, _ := strconv.Atoi(am[1])
	if permits != 2 || timeout != 60*time.Millisecond || attempts != 3 {
		t.Errorf("Describe says permits %d, StockReport timeout %v, max_attempts %d; the last edits set 2, 60ms, 3:\n%s", permits, timeout, attempts, desc)
	}
	// Every change names the last source that set it.
	sources := map[string]string{}
	for _, ch := range c.Runtime().Changes() {
		sources[ch.Key] = ch.Source
	}
	for key, want := range map[string]string{
		"bulkhead.permits":                       "WithPolicy",
		"bulkhead.max_wait":                      `overrides.yaml: services."example.inventory.v1.InventoryService".bulkhead.max_wait`,
		"methods.StockReport.timeout":            svcEnv + "METHODS__STOCKREPORT__TIMEOUT",
		"methods.StockReport.retry.max_attempts": svcEnv + "METHODS__STOCKREPORT__RETRY__MAX_ATTEMPTS",
	} {
		if got := sources[key]; got != want {
			t.Errorf("Changes: %s from %q, want %q (all: %+v)", key, got, want, c.Runtime().Changes())
		}
	}

	ctx := context.Background()
	// Attempts: as many as Describe says.
	fs.SetBehaviour(server.Fail(codes.Unavailable))
	if _, err := c.StockReport(ctx, &inventoryv1.StockReportRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("StockReport against UNAVAILABLE: %v", err)
	}
	const method = "/example.inventory.v1.InventoryService/StockReport"
	if got := fs.Calls(method); got != attempts {
		t.Errorf("Describe says max_attempts %d; the server saw %d attempts", attempts, got)
	}

	// Timeout: a hung call ends after max_attempts × timeout at least (the
	// default codes do not retry an expired attempt, so one), and before
	// the file's 900ms: the bound is the 60ms timeout plus 600ms of
	// scheduling slack for -race on a loaded machine, still short of the
	// 900ms a timeout left at the file's value would take.
	fs.SetBehaviour(server.Hang)
	start := time.Now()
	_, err = c.StockReport(ctx, &inventoryv1.StockReportRequest{})
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded || took < timeout || took > timeout+600*time.Millisecond {
		t.Errorf("a hung StockReport ended after %v with %v; Describe says its timeout is %v", took, err, timeout)
	}

	// Bulkhead: hung calls reach the server no more than permits at once,
	// and permits of them do. The server counts a call until its handler
	// sees the cancellation, a little after the caller left and freed its
	// permit: a call that entered the bulkhead only after another had ended
	// (a goroutine the loaded machine started late) may take that permit
	// and meet the old call on the server, 3 where the client never had
	// more than 2. Such a round proves nothing either way: it is run again,
	// on a fresh server and client, up to 5 times. In a round where every
	// call entered before any ended, the 6 calls came in together, inside
	// one timeout: permits reach the server, the others wait max_wait and
	// are refused.
	const rounds = 5
	for round := 1; ; round++ {
		rc, rfs, _ := r18tClient(t, "overrides.yaml", file, env, func(p *policy.Service) { p.Bulkhead.Permits = 2 })
		rfs.SetBehaviour(server.Hang)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			lastIn   time.Time
			firstOut time.Time
		)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := time.Now()
				_, _ = rc.StockReport(ctx, &inventoryv1.StockReportRequest{})
				out := time.Now()
				mu.Lock()
				defer mu.Unlock()
				if in.After(lastIn) {
					lastIn = in
				}
				if firstOut.IsZero() || out.Before(firstOut) {
					firstOut = out
				}
			}()
		}
		wg.Wait()
		if lastIn.After(firstOut) {
			if round == rounds {
				t.Fatalf("in each of %d rounds a call entered the bulkhead only after another had ended: the machine is too loaded to measure it", rounds)
			}
			t.Logf("bulkhead round %d: a call entered %v after another ended; running it again", round, lastIn.Sub(firstOut))
			continue
		}
		if got := rfs.MaxInFlight(); got != permits {
			t.Errorf("Describe says %d permits; %d calls were in flight at once", permits, got)
		}
		break
	}
}

// r18tReady connects cc and waits until it is ready, so that a measured
// call does not spend its attempt's timeout on the connection of a loaded
// machine.
func r18tReady(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("the connection to the loopback server is %v after 10s", s)
		}
	}
}

// r18tClient parses file (named name) and env as overrides of the example's
// InventoryService, starts a healthy loopback server, and builds the client
// from the overrides with edit applied after them as a WithPolicy option,
// its connection (returned for more clients) ready. The server and
// connection end with the test.
func r18tClient(t *testing.T, name string, file []byte, env []string, edit func(*policy.Service)) (*inventoryv1.InventoryServiceResilientClient, *faultserver.Server, *grpc.ClientConn) {
	t.Helper()
	set, err := override.Parse(name, file, env, inventory)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := faultserver.Start(server.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	cc, err := grpc.NewClient("passthrough:///"+fs.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	r18tReady(t, cc)
	opts := append(set.Options(inventory), runtime.WithPolicy(edit))
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{Runtime: opts})
	if err != nil {
		t.Fatal(err)
	}
	return c, fs, cc
}

// describedNum is the number in the first submatch of re in desc, a
// Describe text; the test fails if no line matches.
func describedNum(t *testing.T, desc, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(desc)
	if m == nil {
		t.Fatalf("Describe has no line matching %q:\n%s", re, desc)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
