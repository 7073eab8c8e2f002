package runtime

import (
	"reflect"

	"google.golang.org/grpc"
)

// holdsNil reports whether o, a call option that is not nil itself, holds
// a nil that grpc-go writes through or calls inside the call, and so
// panics on: grpc.Header(nil), grpc.Trailer(nil), grpc.Peer(nil),
// grpc.OnFinish(nil), grpc.ForceCodec(nil), grpc.CallCustomCodec(nil) (or
// a pointer to one of those), or an option of the program's that embeds a
// nil grpc.CallOption. On a stream, that panic comes while grpc-go holds
// the stream's lock, and its goroutine that ends the stream blocks on it
// for ever. Only a call given options pays the look.
func holdsNil(o grpc.CallOption) bool {
	switch o := o.(type) {
	case grpc.HeaderCallOption:
		return o.HeaderAddr == nil
	case *grpc.HeaderCallOption:
		return o.HeaderAddr == nil
	case grpc.TrailerCallOption:
		return o.TrailerAddr == nil
	case *grpc.TrailerCallOption:
		return o.TrailerAddr == nil
	case grpc.PeerCallOption:
		return o.PeerAddr == nil
	case *grpc.PeerCallOption:
		return o.PeerAddr == nil
	case grpc.OnFinishCallOption:
		return o.OnFinish == nil
	case *grpc.OnFinishCallOption:
		return o.OnFinish == nil
	case grpc.ForceCodecCallOption:
		return isNil(o.Codec)
	case *grpc.ForceCodecCallOption:
		return isNil(o.Codec)
	case grpc.CustomCodecCallOption:
		return isNil(o.Codec)
	case *grpc.CustomCodecCallOption:
		return isNil(o.Codec)
	}
	v := reflect.ValueOf(o)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false
	}
	t := v.Type()
	for i := range t.NumField() {
		if f := t.Field(i); f.Anonymous && f.Type == callOptionType && v.Field(i).IsNil() {
			return true
		}
	}
	return false
}

var callOptionType = reflect.TypeFor[grpc.CallOption]()
