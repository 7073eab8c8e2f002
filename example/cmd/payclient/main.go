// Command payclient charges one order through the generated payments
// client, and nothing else: it is the smallest program that uses a
// generated client, so that CI can check what such a program links (the
// client runtime, grpc-go, protobuf-go and client_golang; not the server
// side, not go-redis).
//
//	go run ./example/cmd/server &
//	go run ./example/cmd/payclient -addr 127.0.0.1:50051 -order o-1 -cents 1250
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
	"github.com/go-resilient/resilient/runtime"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "`host:port` of the example server")
	order := flag.String("order", "o-1", "the order to charge")
	cents := flag.Int64("cents", 100, "the amount, in cents")
	flag.Parse()
	if err := run(*addr, *order, *cents); err != nil {
		fmt.Fprintln(os.Stderr, "payclient:", err)
		os.Exit(1)
	}
}

func run(addr, order string, cents int64) error {
	cc, err := grpc.NewClient(addr, append(runtime.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return err
	}
	defer cc.Close()
	payments, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := payments.Charge(ctx, &paymentsv1.ChargeRequest{OrderId: order, AmountCents: cents})
	if err != nil {
		return err
	}
	fmt.Println(resp.GetChargeId())
	return nil
}
