// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/contract"
)

// Fill writes every value set in msg, one group of the options (a Retry,
// a CircuitBreaker, …), into the struct dst points to: each into the field
// named as the option in camel case (cool_down → CoolDown;
// backoff_multiplier → Multiplier, fresh_ttl → FreshTTL: contract.GoName). Durations go to
// time.Duration fields, counts to int fields, numbers to float64 fields,
// code names to a []codes.Code (in the order written) or to a bit set of
// codes (an integer type, as policy.CodeSet), other names to a []string,
// a code name to a codes.Code, an enum to a field of its type. per_method,
// which says whose the group is rather than what it holds, is not
// written, nor a group inside the group (server's dedup), which has its
// own policy. The values are checked ones (Check). It is the one place
// that turns the options into policy values: the plugin fills the data of
// the generated literal with it, the override loader the runtime's policy.
// The error names a field dst has no place for.
func Fill(dst any, msg proto.Message) error {
	if msg == nil || reflect.ValueOf(msg).IsNil() {
		return nil
	}
	d := reflect.ValueOf(dst).Elem()
	var missing []string
	msg.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		if name == "per_method" || (fd.Message() != nil && !isSingleValue(fd.Message())) {
			return true
		}
		f := d.FieldByName(contract.GoName(name))
		if !f.IsValid() || !f.CanSet() || !fill(f, fd, v) {
			missing = append(missing, name)
		}
		return true
	})
	if len(missing) > 0 {
		return fmt.Errorf("%T has no field for %s", dst, strings.Join(missing, ", "))
	}
	return nil
}

// fill writes one value v of the option fd into f; false when f cannot
// hold it.
func fill(f reflect.Value, fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	switch {
	case fd.IsList():
		var names []string
		for i := range v.List().Len() {
			names = append(names, v.List().Get(i).String())
		}
		switch {
		case f.Type() == reflect.TypeOf([]string(nil)):
			f.Set(reflect.ValueOf(names))
		case f.Type() == reflect.TypeOf([]codes.Code(nil)):
			f.Set(reflect.ValueOf(CodesOf(names, []codes.Code{})))
		case f.Kind() == reflect.Uint32:
			var set uint64
			for _, c := range CodesOf(names, nil) {
				set |= 1 << c
			}
			f.SetUint(set)
		default:
			return false
		}
	case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Duration":
		if f.Kind() != reflect.Int64 {
			return false
		}
		f.SetInt(int64(v.Message().Interface().(*durationpb.Duration).AsDuration()))
	case fd.Kind() == protoreflect.Uint32Kind && f.Kind() == reflect.Int:
		n := int64(v.Uint())
		if f.OverflowInt(n) {
			n = math.MaxInt32 // a 32-bit int: the count held as far as it goes, never wrapped negative
		}
		f.SetInt(n)
	case fd.Kind() == protoreflect.DoubleKind && f.Kind() == reflect.Float64:
		f.SetFloat(v.Float())
	case fd.Kind() == protoreflect.BoolKind && f.Kind() == reflect.Bool:
		f.SetBool(v.Bool())
	case fd.Kind() == protoreflect.StringKind && f.Type() == reflect.TypeOf(codes.Code(0)):
		c, _ := ParseCode(v.String()) // checked
		f.Set(reflect.ValueOf(c))
	case fd.Kind() == protoreflect.StringKind && f.Kind() == reflect.String:
		f.SetString(v.String())
	case fd.Kind() == protoreflect.EnumKind && f.Kind() == reflect.Int32:
		f.SetInt(int64(v.Enum()))
	default:
		return false
	}
	return true
}
