package runtime

import (
	"testing"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// BenchmarkKeyedCodecMarshal compares the runtime's codec of keyed calls
// with gRPC's default one, writing a message of five scalar fields and no
// map (a FieldDescriptorProto, the size of a ReserveStockRequest) and one
// with a map of 16 entries (a Struct).
func BenchmarkKeyedCodecMarshal(b *testing.B) {
	fields := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"} {
		fields[k] = "v-" + k
	}
	withMap, err := structpb.NewStruct(fields)
	if err != nil {
		b.Fatal(err)
	}
	for _, msg := range []struct {
		name string
		v    any
	}{
		{"message=scalars", &descriptorpb.FieldDescriptorProto{Name: proto.String("order_id"), Number: proto.Int32(1),
			JsonName: proto.String("01JDKQ3V8X5T7R9M2N4P6W8Y0Z"), TypeName: proto.String(".a.B"), Proto3Optional: proto.Bool(true)}},
		{"message=map16", withMap},
	} {
		for _, c := range []struct {
			name  string
			codec encoding.CodecV2
		}{
			{"codec=grpc", encoding.GetCodecV2(protocodec.Name)},
			{"codec=keyed", keyedCodec{}},
		} {
			b.Run(msg.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					data, err := c.codec.Marshal(msg.v)
					if err != nil {
						b.Fatal(err)
					}
					data.Free()
				}
			})
		}
	}
}
