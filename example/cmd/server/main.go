// Command server serves the example InventoryService and PaymentsService
// with faults injected on request.
//
//	go run ./example/cmd/server -addr 127.0.0.1:50051 -latency 40ms
//	go run ./example/cmd/server -fail UNAVAILABLE      # every call fails
//	go run ./example/cmd/server -hang                  # no call is ever answered
//	go run ./example/cmd/server -metrics-addr 127.0.0.1:9090  # Prometheus metrics of the process
//	go run ./example/cmd/server -redis 127.0.0.1:6379        # dedup entries on Redis (default: in memory)
//	go run ./example/cmd/server -overrides overrides.yaml     # e.g. shedding: {low: 4} for InventoryService
//	go run ./example/cmd/server -guard=false                  # no server-side policy at all
//
// The inventory service's annotated server-side policy (the generated
// InventoryServiceServerPolicy) is applied by a Guard: dead requests
// dropped, load shed by priority, ReserveStock deduplicated by order id. -overrides and RESILIENT__ variables change its
// values at start-up, checked like the annotations (package override).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
	rserver "github.com/go-resilient/resilient/runtime/server"
	"github.com/go-resilient/resilient/runtime/server/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "`host:port` to listen on")
	latency := flag.Duration("latency", 40*time.Millisecond, "how long each call takes")
	fail := flag.String("fail", "", "answer every call with this status `code` (e.g. UNAVAILABLE)")
	failRatio := flag.Float64("fail-ratio", 1, "share of calls that fail when -fail is set, in (0, 1]")
	hang := flag.Bool("hang", false, "never answer")
	metricsAddr := flag.String("metrics-addr", "", "serve Prometheus metrics on http://`host:port`/metrics (none if empty)")
	guard := flag.Bool("guard", true, "apply the services' annotated server-side policy (deadlines, shedding, dedup)")
	redisAddr := flag.String("redis", "", "keep the idempotency entries on the Redis at `host:port` (default: in memory, for one replica)")
	overridesFile := flag.String("overrides", "", "YAML or JSON `file` of operator overrides of the server-side policy (shedding, server)")
	grace := flag.Duration("grace", 10*time.Second, "on a signal, how long the calls in flight may take to finish before they are cancelled")
	flag.Parse()
	if *metricsAddr != "" {
		lis, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "server: -metrics-addr:", err)
			os.Exit(1)
		}
		fmt.Printf("metrics on http://%s/metrics\n", lis.Addr())
		go http.Serve(lis, promhttp.Handler()) //nolint:errcheck // ends with the process
	}

	b := server.Slow(*latency)
	if *hang {
		b = server.Hang
	}
	if *fail != "" {
		// grpc-go reads a code's name (as in the .proto's
		// retryable_codes) from its quoted JSON form.
		var code codes.Code
		if err := code.UnmarshalJSON([]byte(strconv.Quote(*fail))); err != nil || code == codes.OK {
			fmt.Fprintf(os.Stderr, "server: -fail %q: not a gRPC status code name; use e.g. UNAVAILABLE, RESOURCE_EXHAUSTED, FAILED_PRECONDITION\n", *fail)
			os.Exit(2)
		}
		if *failRatio <= 0 || *failRatio > 1 {
			fmt.Fprintf(os.Stderr, "server: -fail-ratio %v: must be in (0, 1]\n", *failRatio)
			os.Exit(2)
		}
		failing, slow := server.Fail(code), b
		every := int(1 / *failRatio)
		b = func(ctx context.Context, c server.Call) error {
			if c.N%every == 0 {
				return failing(ctx, c)
			}
			return slow(ctx, c)
		}
	}
	// Accept the keep-alive pings of clients dialled with runtime.DialOptions.
	opts := runtime.ServerOptions()
	if *guard {
		g, err := newGuard(*redisAddr, *overridesFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "server:", err)
			os.Exit(1)
		}
		opts = append(opts, g.ServerOptions()...)
	}
	srv, err := server.Start(*addr, b, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	fmt.Printf("serving example.inventory.v1.InventoryService and example.payments.v1.PaymentsService on %s\n", srv.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	<-ctx.Done()
	stop() // a second SIGINT ends the process at once, handlers running or not
	// Not Stop: the Guard must release the key of each keyed request it
	// did not finish before the process exits (Shutdown).
	srv.Shutdown(*grace)
}

// newGuard builds the Guard of the example services: the store of the
// idempotency entries, and the operator's overrides checked against the
// annotated policies.
func newGuard(redisAddr, overridesFile string) (*rserver.Guard, error) {
	set, err := override.Load(overridesFile, os.Environ(),
		&inventoryv1.InventoryServiceResilientPolicy, &paymentsv1.PaymentsServiceResilientPolicy)
	if err != nil {
		return nil, err
	}
	opts, err := set.ServerOptions(&inventoryv1.InventoryServiceServerPolicy)
	if err != nil {
		return nil, err
	}
	if redisAddr != "" {
		// When Redis cannot be reached, each deduplicated method does what
		// its annotation says (on_store_error): ReserveStock refuses.
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
		opts = append(opts, rserver.WithStore(redisstore.New(rdb, "example:idem:")))
		fmt.Printf("idempotency entries on Redis at %s\n", redisAddr)
	}
	return server.NewGuard(opts...)
}
