package runtime

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// keyedCodec is the codec of the calls that send an idempotency key: it
// writes a request as protobuf's deterministic serialization, so that every
// attempt and hedged copy of one call, and every call of one request, sends
// the same bytes. gRPC's default codec writes the entries of a map field in
// Go's map-iteration order, another at each marshal; a server that does not
// know the field (a replica of an older schema, during a rolling deploy
// that adds it) fingerprints it as sent, and would refuse the retry of a
// request that ran as "a different request". Answers are read by the codec
// registered for "proto" (gRPC's, or one a program registered in its
// place), as without it.
type keyedCodec struct{}

// keyedOptions are the options a keyed call adds when the caller gives
// none of its own: the codec, and the content subtype it writes ("proto"),
// which a connection's default subtype (grpc.WithDefaultCallOptions(
// grpc.CallContentSubtype("json"))) would otherwise leave on the request.
// Made once; the slice is full, so that an append to it copies.
var keyedOptions = []grpc.CallOption{grpc.ForceCodecV2(keyedCodec{}), grpc.CallContentSubtype(protocodec.Name)}[:2:2]

// withKeyedCodec returns the options of a call that sends an idempotency
// key: opts and keyedOptions, after them so that they replace the codec
// and subtype a connection sets by default. A caller that gives the call a
// codec or a content subtype of its own (grpc.ForceCodec, ForceCodecV2,
// CallContentSubtype, CallCustomCodec, or a pointer to the option one of
// them returns; not ForceCodecV2(nil), which leaves the connection's
// codec) chose how the request is written:
// its options are returned as they are, and the same bytes on each attempt
// are then its codec's to give. No options cost no allocation.
func withKeyedCodec(opts []grpc.CallOption) []grpc.CallOption {
	if len(opts) == 0 {
		return keyedOptions
	}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.ForceCodecV2CallOption:
			if o.CodecV2 == nil {
				continue // gRPC then uses the connection's codec: no choice made
			}
			return opts
		case *grpc.ForceCodecV2CallOption:
			if o.CodecV2 == nil {
				continue
			}
			return opts
		case grpc.ForceCodecCallOption, grpc.CustomCodecCallOption, grpc.ContentSubtypeCallOption,
			// A pointer to one is a grpc.CallOption too (its methods have
			// value receivers), and the caller's choice as much.
			*grpc.ForceCodecCallOption, *grpc.CustomCodecCallOption, *grpc.ContentSubtypeCallOption:
			return opts
		}
	}
	return append(opts[:len(opts):len(opts)], keyedOptions...)
}

// Marshal writes v, a protobuf message, deterministically, in a pooled
// buffer when it is large, as gRPC's own codec does. A value that is not
// a protobuf message goes to the registered codec.
func (keyedCodec) Marshal(v any) (mem.BufferSlice, error) {
	var msg proto.Message
	switch v := v.(type) {
	case protoadapt.MessageV2:
		msg = v
	case protoadapt.MessageV1:
		msg = protoadapt.MessageV2Of(v)
	default:
		return registeredCodec().Marshal(v)
	}
	// Size first, so that the marshal may use the cached sizes.
	size := proto.Size(msg)
	o := proto.MarshalOptions{Deterministic: true, UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := o.Marshal(msg)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := o.MarshalAppend((*buf)[:0], msg); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal reads an answer with the registered codec.
func (keyedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return registeredCodec().Unmarshal(data, v)
}

// Name is the content subtype of the requests: "proto".
func (keyedCodec) Name() string { return protocodec.Name }

// registeredCodec returns the codec registered for "proto", looked up at
// each use: a program may register its own in an init function that runs
// after this package's. gRPC registers one in its encoding/proto package,
// which grpc itself imports, so there is always one.
func registeredCodec() encoding.CodecV2 {
	return encoding.GetCodecV2(protocodec.Name)
}
