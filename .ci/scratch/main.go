// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

// The program .ci/run's adoption step builds in a scratch module against
// the code generated from the README's example, and runs: a loopback server
// whose first answer to each method is UNAVAILABLE, called through the
// generated resilient client. It exits non-zero unless GetStock was retried
// once and ReserveStock was retried once with the same idempotency key.
package main

import (
	"context"
	"log"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inventoryv1 "example.com/shop/gen/shop/inventory/v1"
)

// server answers UNAVAILABLE to the first call of each method and records
// the idempotency-key of every call.
type server struct {
	inventoryv1.UnimplementedInventoryServiceServer
	mu    sync.Mutex
	calls map[string][]string
}

func (s *server) seen(ctx context.Context, method string) int {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method] = append(s.calls[method], md.Get("idempotency-key")...)
	if len(md.Get("idempotency-key")) == 0 {
		s.calls[method] = append(s.calls[method], "")
	}
	return len(s.calls[method])
}

func (s *server) GetStock(ctx context.Context, req *inventoryv1.GetStockRequest) (*inventoryv1.GetStockResponse, error) {
	if s.seen(ctx, "GetStock") == 1 {
		return nil, status.Error(codes.Unavailable, "first attempt refused")
	}
	return &inventoryv1.GetStockResponse{Sku: req.GetSku(), Units: 7}, nil
}

func (s *server) ReserveStock(ctx context.Context, req *inventoryv1.ReserveStockRequest) (*inventoryv1.ReserveStockResponse, error) {
	if s.seen(ctx, "ReserveStock") == 1 {
		return nil, status.Error(codes.Unavailable, "first attempt refused")
	}
	return &inventoryv1.ReserveStockResponse{ReservationId: "r-" + req.GetOrderId()}, nil
}

func main() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	s := &server{calls: map[string][]string{}}
	srv := grpc.NewServer()
	inventoryv1.RegisterInventoryServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	client, err := inventoryv1.NewInventoryServiceResilientClient(cc, inventoryv1.InventoryServiceResilientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var _ inventoryv1.InventoryServiceClient = client // a drop-in replacement

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The connection is made ready first: on a loaded CI machine, dialling
	// outlasted GetStock's first attempt (300 ms), which made the counts
	// below another test than the retry of UNAVAILABLE they check.
	cc.Connect()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if !cc.WaitForStateChange(ctx, st) {
			log.Fatalf("the loopback connection never became ready: %v", st)
		}
	}
	stock, err := client.GetStock(ctx, &inventoryv1.GetStockRequest{Sku: "sku-1"})
	if err != nil || stock.GetUnits() != 7 || len(s.calls["GetStock"]) != 2 {
		log.Fatalf("GetStock: %v, %v after %d calls; want 7 units after 2 (one retry of UNAVAILABLE)", stock, err, len(s.calls["GetStock"]))
	}
	res, err := client.ReserveStock(ctx, &inventoryv1.ReserveStockRequest{OrderId: "o-1", Sku: "sku-1", Units: 1})
	keys := s.calls["ReserveStock"]
	if err != nil || res.GetReservationId() != "r-o-1" || len(keys) != 2 || keys[0] != "o-1" || keys[1] != "o-1" {
		log.Fatalf("ReserveStock: %v, %v with keys %q; want r-o-1 after 2 calls keyed o-1", res, err, keys)
	}
	log.Printf("GetStock: %d units after %d calls; ReserveStock: %s after %d calls with idempotency-key %q",
		stock.GetUnits(), len(s.calls["GetStock"]), res.GetReservationId(), len(keys), keys[0])
}
