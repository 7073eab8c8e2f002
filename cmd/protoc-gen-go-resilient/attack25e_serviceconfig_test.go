// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	inventoryv1 "github.com/go-resilient/resilient/example/gen/example/inventory/v1"
	paymentsv1 "github.com/go-resilient/resilient/example/gen/example/payments/v1"
)

// attack25eDial dials addr, with the service config sc when not empty, and
// waits until the connection is ready, so that a timed call does not spend
// its time dialling.
func attack25eDial(t *testing.T, addr, sc string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if sc != "" {
		opts = append(opts, grpc.WithDefaultServiceConfig(sc))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if !cc.WaitForStateChange(ctx, st) {
			t.Fatalf("the connection to %s is %v after 10s", addr, st)
		}
	}
	return cc
}

// exampleServiceConfig reads the checked-in service config of an example.
func exampleServiceConfig(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "example", "gen", "example", name, "v1", name+".service_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const (
	a25eInv         = "/example.inventory.v1.InventoryService/"
	a25eCharge      = "/example.payments.v1.PaymentsService/Charge"
	a25eGetStock    = a25eInv + "GetStock"
	a25eReserve     = a25eInv + "ReserveStock"
	a25eStockReport = a25eInv + "StockReport"
)

// attack25eGoCall calls method through the generated Go client of the
// example, on a fresh client (its own breaker and budget), with order as
// the order id of the keyed methods.
func attack25eGoCall(t *testing.T, cc *grpc.ClientConn, method, order string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch method {
	case a25eCharge:
		c, err := paymentsv1.NewPaymentsServiceResilientClient(cc, paymentsv1.PaymentsServiceResilientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Charge(ctx, &paymentsv1.ChargeRequest{OrderId: order, AmountCents: 100})
		return err
	}
	c, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch method {
	case a25eGetStock:
		_, err = c.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "sku-1"})
	case a25eReserve:
		_, err = c.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: order, Sku: "sku-1", Units: 1})
	case a25eStockReport:
		_, err = c.StockReport(ctx, &inventoryv1.StockReportRequest{})
	default:
		t.Fatalf("no such method %s", method)
	}
	return err
}

// attack25ePlainCall calls method on a channel that loaded the example's
// service config, as a caller in another language would, sending the
// idempotency-key header itself when key is not empty.
func attack25ePlainCall(cc *grpc.ClientConn, method, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", key)
	}
	return cc.Invoke(ctx, method, new(emptypb.Empty), new(emptypb.Empty))
}

// TestAttack25eExampleServiceConfigMatchesGoClient loads the example's
// checked-in service configs into plain grpc-go channels and, for every
// non-OK code a loopback server can answer, counts the attempts the
// server sees from them and from the generated Go clients of the same
// methods. README (Export: gRPC service config): the same retryable codes,
// less DEADLINE_EXCEEDED; attempts as annotated; a method safe to repeat
// only with its key gets no retryPolicy, so a caller of the file sends it
// once, with or without a header of its own, while the generated Go client
// retries it with its key on every attempt (and sends an empty key once,
// no header); not idempotent: never repeated.
func TestAttack25eExampleServiceConfigMatchesGoClient(t *testing.T) {
	srv, addr := startCountingServer(t)
	inv := attack25eDial(t, addr, exampleServiceConfig(t, "inventory"))
	pay := attack25eDial(t, addr, exampleServiceConfig(t, "payments"))
	bare := attack25eDial(t, addr, "")
	plainConn := func(method string) *grpc.ClientConn {
		if method == a25eCharge {
			return pay
		}
		return inv
	}
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		retried := code == codes.Unavailable // GetStock's and ReserveStock's retryable_codes
		for _, tc := range []struct {
			method, order string
			plain, gocl   int // attempts the server sees
			goKeyed       bool
		}{
			{a25eGetStock, "", 1, 1, false},
			{a25eReserve, "order-7", 1, 1, true},
			{a25eReserve, "", 1, 1, false},
			{a25eStockReport, "", 1, 1, false},
			{a25eCharge, "order-7", 1, 1, false},
		} {
			if retried && (tc.method == a25eGetStock || tc.method == a25eReserve && tc.order != "") {
				tc.gocl = 3
				if tc.method == a25eGetStock {
					tc.plain = 3
				}
			}
			// The plain caller, with the header its own code would send.
			srv.set(code, 0)
			err := attack25ePlainCall(plainConn(tc.method), tc.method, tc.order)
			if status.Code(err) != code {
				t.Errorf("%v %s through the service config: %v", code, tc.method, err)
			}
			if got := len(srv.seen(tc.method)); got != tc.plain {
				t.Errorf("%v %s (key %q) through the service config: the server saw %d attempts, want %d", code, tc.method, tc.order, got, tc.plain)
			}
			// The generated Go client.
			srv.set(code, 0)
			err = attack25eGoCall(t, bare, tc.method, tc.order)
			if status.Code(err) != code {
				t.Errorf("%v %s through the Go client: %v", code, tc.method, err)
			}
			seen := srv.seen(tc.method)
			if len(seen) != tc.gocl {
				t.Errorf("%v %s (key %q) through the Go client: the server saw %d attempts, want %d", code, tc.method, tc.order, len(seen), tc.gocl)
			}
			for i, k := range seen {
				if want := map[bool]string{true: tc.order}[tc.goKeyed]; k != want {
					t.Errorf("%v %s through the Go client: attempt %d carried idempotency-key %q, want %q", code, tc.method, i+1, k, want)
				}
			}
		}
	}
}

// TestAttack25eExampleServiceConfigTimeouts: the exported timeouts, on a
// server that is slow or hangs. GetStock's 1.050s is the longest the Go
// client lets it run, so three attempts that each take 200 ms and fail
// with UNAVAILABLE are all made by both callers; ReserveStock, sent once
// by a caller of the file, is cut at one attempt's 300 ms (README: "its
// timeout is that of one attempt"), as the Go client cuts each of its own.
func TestAttack25eExampleServiceConfigTimeouts(t *testing.T) {
	srv, addr := startCountingServer(t)
	inv := attack25eDial(t, addr, exampleServiceConfig(t, "inventory"))
	bare := attack25eDial(t, addr, "")

	srv.set(codes.Unavailable, 200*time.Millisecond)
	if err := attack25ePlainCall(inv, a25eGetStock, ""); status.Code(err) != codes.Unavailable {
		t.Errorf("GetStock, slow UNAVAILABLE, through the service config: %v, want UNAVAILABLE after 3 attempts", err)
	}
	if got := len(srv.seen(a25eGetStock)); got != 3 {
		t.Errorf("GetStock, slow UNAVAILABLE, through the service config: %d attempts, want 3 (the exported timeout cut the retries)", got)
	}
	srv.set(codes.Unavailable, 200*time.Millisecond)
	if err := attack25eGoCall(t, bare, a25eGetStock, ""); status.Code(err) != codes.Unavailable {
		t.Errorf("GetStock, slow UNAVAILABLE, through the Go client: %v", err)
	}
	if got := len(srv.seen(a25eGetStock)); got != 3 {
		t.Errorf("GetStock, slow UNAVAILABLE, through the Go client: %d attempts, want 3", got)
	}

	for _, key := range []string{"", "order-9"} {
		srv.set(codes.OK, 5*time.Second)
		start := time.Now()
		err := attack25ePlainCall(inv, a25eReserve, key)
		took := time.Since(start)
		if status.Code(err) != codes.DeadlineExceeded || took < 300*time.Millisecond || took > 900*time.Millisecond {
			t.Errorf("ReserveStock (key %q) on a hung server through the service config: %v after %v, want DEADLINE_EXCEEDED after about 300ms", key, err, took)
		}
		if got := len(srv.seen(a25eReserve)); got != 1 {
			t.Errorf("ReserveStock (key %q) on a hung server through the service config: %d attempts, want 1", key, got)
		}
	}
}
