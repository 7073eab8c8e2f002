// Command server serves the example InventoryService and PaymentsService
// with faults injected on request.
//
//	go run ./example/cmd/server -addr 127.0.0.1:50051 -latency 40ms
//	go run ./example/cmd/server -fail UNAVAILABLE      # every call fails
//	go run ./example/cmd/server -hang                  # no call is ever answered
//	go run ./example/cmd/server -metrics-addr 127.0.0.1:9090  # Prometheus metrics of the process
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"

	"github.com/go-resilient/resilient/example/server"
	"github.com/go-resilient/resilient/runtime"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "`host:port` to listen on")
	latency := flag.Duration("latency", 40*time.Millisecond, "how long each call takes")
	fail := flag.String("fail", "", "answer every call with this status `code` (e.g. UNAVAILABLE)")
	failRatio := flag.Float64("fail-ratio", 1, "share of calls that fail when -fail is set, in (0, 1]")
	hang := flag.Bool("hang", false, "never answer")
	metricsAddr := flag.String("metrics-addr", "", "serve Prometheus metrics on http://`host:port`/metrics (none if empty)")
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
		code, ok := runtime.ParseCode(*fail)
		if !ok || code == codes.OK {
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
	srv, err := server.Start(*addr, b)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	fmt.Printf("serving example.inventory.v1.InventoryService and example.payments.v1.PaymentsService on %s\n", srv.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
	srv.Stop()
}
