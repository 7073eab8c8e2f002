package runtime

import (
	"reflect"

	"google.golang.org/grpc"
)

// holdsNil reports whether o, a call option that is not nil itself, holds
// a nil grpc-go would panic on that nilTarget does not see: a pointer to
// one of the options nilTarget reads, given nil (&grpc.HeaderCallOption{}),
// or an option of the program's that embeds a grpc.CallOption left nil
// (grpc-go calls the embedded option's methods). Only a call given options
// pays the look.
func holdsNil(o grpc.CallOption) bool {
	v := reflect.ValueOf(o)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return false // isNil's
		}
		if inner, ok := v.Elem().Interface().(grpc.CallOption); ok && nilTarget(inner) {
			return true
		}
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

// callOptionType is the type grpc.CallOption, for holdsNil.
var callOptionType = reflect.TypeFor[grpc.CallOption]()
