// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/go-resilient/resilient/runtime/internal/keypb"
)

// countingConn is a connection whose unary calls succeed at once with an
// empty answer, counting them: what reaches it is what the cache missed.
type countingConn struct{ calls atomic.Int64 }

func (c *countingConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	c.calls.Add(1)
	return nil
}

func (c *countingConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	panic("countingConn: no streams here")
}

// keysApart calls each request twice, through a generated client's cached
// method, and wants one call of each to reach the connection: every
// request of reqs has a cache key of its own, and the same request hits
// it. same are requests that must then hit one of those keys.
func keysApart[Req any](t *testing.T, cc *countingConn, call func(*Req) error, reqs []*Req, same []*Req) {
	t.Helper()
	for round := range 2 {
		for i, r := range reqs {
			if err := call(r); err != nil {
				t.Fatalf("round %d, request %d (%v): %v", round, i, r, err)
			}
		}
		if got, want := cc.calls.Load(), int64(len(reqs)); got != want {
			t.Fatalf("round %d: %d calls reached the connection for %d requests with different keys, want %d",
				round, got, len(reqs), want)
		}
	}
	for i, r := range same {
		if err := call(r); err != nil {
			t.Fatalf("request %d (%v): %v", i, r, err)
		}
		if got, want := cc.calls.Load(), int64(len(reqs)); got != want {
			t.Fatalf("request %d (%v) missed the cache: %d calls, want %d", i, r, got, want)
		}
	}
}

// A proto3 optional field (string, integer, bytes) and a oneof member of
// a cache key: unset, set to the zero value and set to a value are three
// keys; a field without presence and a oneof's other member change none.
func TestCacheKeyPresenceProto3(t *testing.T) {
	cc := new(countingConn)
	c, err := keypb.NewPresenceServiceResilientClient(cc, keypb.PresenceServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func(r *keypb.LookupRequest) error { _, err := c.Lookup(ctx, r); return err }
	keysApart(t, cc, call, []*keypb.LookupRequest{
		{},
		{Account: proto.String("")},
		{Account: proto.String("a")},
		{Day: proto.Int64(0)},
		{Day: proto.Int64(7)},
		{Blob: []byte{}},
		{Blob: []byte("x")},
		{At: &keypb.LookupRequest_Branch{}},
		{At: &keypb.LookupRequest_Branch{Branch: "b"}},
		{Account: proto.String(""), Day: proto.Int64(0)},
		{Account: proto.String("a"), Currency: "EUR"},
	}, []*keypb.LookupRequest{
		{Currency: ""},
		{At: &keypb.LookupRequest_Desk{Desk: 3}}, // not a key field: the branch is unset
		{Blob: nil},
		{Account: proto.String("a")},
	})

	one, err := keypb.NewPresenceServiceResilientClient(cc, keypb.PresenceServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc.calls.Store(0)
	keysApart(t, cc, func(r *keypb.LookupOneRequest) error { _, err := one.LookupOne(ctx, r); return err },
		[]*keypb.LookupOneRequest{{}, {Account: proto.String("")}, {Account: proto.String("=")}, {Account: proto.String("x")}}, nil)
}

// A proto2 optional field of a cache key: unset, zero and a value are
// three keys.
func TestCacheKeyPresenceProto2(t *testing.T) {
	cc := new(countingConn)
	c, err := keypb.NewLegacyServiceResilientClient(cc, keypb.LegacyServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keysApart(t, cc, func(r *keypb.FetchRequest) error { _, err := c.Fetch(ctx, r); return err },
		[]*keypb.FetchRequest{
			{},
			{Name: proto.String("")},
			{Name: proto.String("n")},
			{Shard: proto.Uint32(0)},
			{Shard: proto.Uint32(1)},
		}, nil)
}

// An edition 2023 field (explicit presence by default) and a oneof member
// of a cache key, open API: unset, zero and a value are three keys.
func TestCacheKeyPresenceEditions(t *testing.T) {
	cc := new(countingConn)
	c, err := keypb.NewExplicitServiceResilientClient(cc, keypb.ExplicitServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keysApart(t, cc, func(r *keypb.FindRequest) error { _, err := c.Find(ctx, r); return err },
		[]*keypb.FindRequest{
			{},
			{Name: proto.String("")},
			{Name: proto.String("n")},
			{Shard: proto.Int32(0)},
			{Shard: proto.Int32(-1)},
			{By: &keypb.FindRequest_Token{Token: []byte{}}},
			{By: &keypb.FindRequest_Token{Token: []byte("t")}},
		}, []*keypb.FindRequest{
			{By: &keypb.FindRequest_Label{Label: "l"}}, // not a key field: the token is unset
		})
}

// Fields with presence and a oneof member under the opaque API (edition
// 2024): unset, zero and a value are three keys; a field declared
// without presence is one key for unset and zero.
func TestCacheKeyPresenceOpaque(t *testing.T) {
	cc := new(countingConn)
	c, err := keypb.NewOpaqueServiceResilientClient(cc, keypb.OpaqueServiceResilientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := func(set func(*keypb.QueryRequest)) *keypb.QueryRequest {
		r := new(keypb.QueryRequest)
		set(r)
		return r
	}
	keysApart(t, cc, func(r *keypb.QueryRequest) error { _, err := c.Query(ctx, r); return err },
		[]*keypb.QueryRequest{
			{},
			req(func(r *keypb.QueryRequest) { r.SetName("") }),
			req(func(r *keypb.QueryRequest) { r.SetName("n") }),
			req(func(r *keypb.QueryRequest) { r.SetShard(0) }),
			req(func(r *keypb.QueryRequest) { r.SetShard(9) }),
			req(func(r *keypb.QueryRequest) { r.SetToken(nil) }),
			req(func(r *keypb.QueryRequest) { r.SetToken([]byte("t")) }),
			req(func(r *keypb.QueryRequest) { r.SetPlain("p") }),
		}, []*keypb.QueryRequest{
			req(func(r *keypb.QueryRequest) { r.SetPlain("") }),
			req(func(r *keypb.QueryRequest) { r.SetLabel("l") }), // not a key field: the token is unset
		})
}

// BenchmarkCacheHitPresenceKey measures a cached unary call that hits,
// through a generated client whose cache key has fields with presence:
// proto3 optional fields and a oneof member with a plain field (proto3),
// one optional field alone (one), and fields with presence under the
// opaque API (opaque). Nothing reaches the connection after the first
// call, so the figures are the key's and the cache's alone.
func BenchmarkCacheHitPresenceKey(b *testing.B) {
	ctx := context.Background()
	cc := new(countingConn)
	p, err := keypb.NewPresenceServiceResilientClient(cc, keypb.PresenceServiceResilientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	o, err := keypb.NewOpaqueServiceResilientClient(cc, keypb.OpaqueServiceResilientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	lookup := &keypb.LookupRequest{Account: proto.String("acct-42"), Day: proto.Int64(20260101),
		At: &keypb.LookupRequest_Branch{Branch: "north"}, Currency: "EUR"}
	one := &keypb.LookupOneRequest{Account: proto.String("acct-42")}
	query := new(keypb.QueryRequest)
	query.SetName("acct-42")
	query.SetShard(20260101)
	query.SetLabel("north")
	query.SetPlain("EUR")
	for _, bc := range []struct {
		name string
		call func() error
	}{
		{"proto3", func() error { _, err := p.Lookup(ctx, lookup); return err }},
		{"one", func() error { _, err := p.LookupOne(ctx, one); return err }},
		{"opaque", func() error { _, err := o.Query(ctx, query); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if err := bc.call(); err != nil { // the miss that fills the cache
				b.Fatal(err)
			}
			calls := cc.calls.Load()
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
			}
			if got := cc.calls.Load(); got != calls {
				b.Fatalf("%d calls reached the connection during the loop: the cache missed", got-calls)
			}
		})
	}
}
