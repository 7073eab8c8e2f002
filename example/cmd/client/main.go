// Command client calls the example services through the generated
// resilient clients and reports what happened to each call.
//
//	go run ./example/cmd/server &
//	go run ./example/cmd/client -addr 127.0.0.1:50051 -n 20
//	go run ./example/cmd/client -print-policy   # the policy in force, then exit
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/runtime"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "`host:port` of the example server")
	n := flag.Int("n", 10, "number of orders to place")
	printPolicy := flag.Bool("print-policy", false, "print the policy of every method and exit")
	flag.Parse()
	if err := run(*addr, *n, *printPolicy); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(addr string, n int, printPolicy bool) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	inventory, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithLogger(logger)},
		GetStockFallback: func(_ context.Context, req *inventoryv1.GetStockRequest, err error) (*inventoryv1.GetStockResponse, error) {
			logger.Warn("stock unknown, answering from the fallback", "sku", req.GetSku(), "cause", err)
			return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: -1}, nil
		},
	})
	if err != nil {
		return err
	}
	payments, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{
		Runtime: []runtime.Option{runtime.WithLogger(logger)},
	})
	if err != nil {
		return err
	}
	if printPolicy {
		fmt.Print(runtime.Describe(inventory.Runtime().Policy()))
		fmt.Print(runtime.Describe(payments.Runtime().Policy()))
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
		fmt.Printf("%s: stock %d, %s in %s\n", order, stock.GetUnits(), describe(err), time.Since(start).Round(time.Millisecond))
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
