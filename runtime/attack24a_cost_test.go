package runtime

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The cost of classifying a call's options, paid by every hedged call
// (callerMetaOf, optsFor) and every cache miss's leader (sharedOptions):
// the options generated code and callers commonly give, all grpc-go's.
var (
	sink24a  int
	opts24a  = []grpc.CallOption{grpc.StaticMethod(), grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(1 << 20)}
	md24a    metadata.MD
	withHdr  = append(opts24a[:len(opts24a):len(opts24a)], grpc.Header(&md24a))
	cm24a    copyMeta
	targets_ = []grpc.CallOption{grpc.Header(&md24a), &grpc.TrailerCallOption{TrailerAddr: &md24a}}
)

func BenchmarkAttack24aSharedOptions(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		kept := sharedOptions(opts24a)
		sink24a += len(kept)
	}
}

func BenchmarkAttack24aCallerMetaOf(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if callerMetaOf(opts24a) != nil {
			sink24a++
		}
	}
}

func BenchmarkAttack24aOptsFor(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		sink24a += len(optsFor(withHdr, &cm24a))
	}
}

func BenchmarkAttack24aTargetOf(b *testing.B) {
	for range b.N {
		for _, o := range targets_ {
			sink24a += int(targetOf(o))
		}
	}
}

// The cost ownMetadata adds to a shared call (once per flight, the miss's
// leader) whose starter sends metadata: here the priority header the
// runtime adds and one of the caller's.
func BenchmarkAttack24aOwnMetadata(b *testing.B) {
	ctx := metadata.AppendToOutgoingContext(metadata.NewOutgoingContext(context.Background(), metadata.MD{"x-tenant": {"acme"}}), "x-priority", "high")
	b.ReportAllocs()
	for range b.N {
		if ownMetadata(ctx) == nil {
			sink24a++
		}
	}
}
