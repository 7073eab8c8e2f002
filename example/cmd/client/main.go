// Command client calls the example services through the generated
// resilient clients and reports what happened to each call.
//
//	go run ./example/cmd/server &
//	go run ./example/cmd/client -addr 127.0.0.1:50051 -n 20
//	go run ./example/cmd/client -print-policy   # the policy in force, then exit
//	go run ./example/cmd/client -overrides overrides.yaml -print-policy
//	go run ./example/cmd/client -metrics-addr 127.0.0.1:9091 -n 1000
//
// -overrides reads operator overrides (see package override); variables
// named RESILIENT__… override too. A bad file or variable stops the client
// before it is built, naming the key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/override"
	"github.com/go-resilient/resilient/runtime"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "`host:port` of the example server")
	n := flag.Int("n", 10, "number of orders to place")
	printPolicy := flag.Bool("print-policy", false, "print the policy of every method, and where each changed value came from, and exit")
	overrides := flag.String("overrides", "", "YAML or JSON `file` of operator overrides of the annotated policies")
	metricsAddr := flag.String("metrics-addr", "", "serve Prometheus metrics on http://`host:port`/metrics (none if empty)")
	flag.Parse()
	if err := run(os.Stdout, *addr, *n, *printPolicy, *overrides, *metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

// run places n orders, or with printPolicy writes the policy in force to
// out and returns.
func run(out io.Writer, addr string, n int, printPolicy bool, overridesFile, metricsAddr string) error {
	// The overrides are checked against every client's policy before any
	// client is built: a bad file stops the program here.
	set, err := override.Load(overridesFile, os.Environ(),
		&inventoryv1.InventoryServiceResilientPolicy, &paymentsv1.PaymentsServiceResilientPolicy)
	if err != nil {
		return err
	}
	// The recommended dial options: a connect timeout and keep-alive, so
	// that a vanished server is noticed in seconds, not minutes.
	cc, err := grpc.NewClient(addr, append(runtime.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return err
	}
	defer cc.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	common := []runtime.Option{runtime.WithLogger(logger), runtime.WithRegisterer(reg)}
	if metricsAddr != "" && !printPolicy {
		lis, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return fmt.Errorf("-metrics-addr: %w", err)
		}
		defer lis.Close()
		fmt.Fprintf(os.Stderr, "metrics on http://%s/metrics\n", lis.Addr())
		go http.Serve(lis, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) //nolint:errcheck // ends with the listener
	}
	inventory, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: append(set.Options(&inventoryv1.InventoryServiceResilientPolicy), common...),
		GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			logger.Warn("stock unknown, answering from the fallback", "sku", req.GetSku(), "cause", err)
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		},
	})
	if err != nil {
		return err
	}
	payments, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{
		Runtime: append(set.Options(&paymentsv1.PaymentsServiceResilientPolicy), common...),
	})
	if err != nil {
		return err
	}
	if printPolicy {
		fmt.Fprint(out, inventory.Runtime().Describe())
		fmt.Fprint(out, payments.Runtime().Describe())
		return nil
	}
	for i := range n {
		order := fmt.Sprintf("order-%d", i)
		// The whole order has 500 ms, whatever each call's own timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		start := time.Now()
		stock, err := inventory.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "apple"})
		if err == nil {
			_, err = inventory.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "apple", Units: 1})
		}
		if err == nil {
			_, err = payments.Charge(ctx, &paymentsv1.ChargeRequest{OrderId: order, AmountCents: 1999})
		}
		cancel()
		fmt.Fprintf(out, "%s: stock %d, %s in %s\n", order, stock.GetUnits(), describe(err), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func describe(err error) string {
	switch {
	case err == nil:
		return "placed"
	case errors.Is(err, runtime.ErrCircuitOpen):
		return "refused at once: circuit open"
	case errors.Is(err, runtime.ErrBulkheadFull):
		return "refused: bulkhead full"
	}
	return "failed: " + status.Code(err).String()
}
