// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// defaults is the options contract's defaults, as the options write them:
// the value a group's field takes when no level sets it, read once from
// the (resilient.v1.default_value) of each field of the compiled options
// (options/resilient/v1/resilient.proto), the one place a default is
// written. A field without one (bulkhead.permits, hedging.delay, …) is
// required once its group is set, or means "none" unset
// (slow_call_threshold); a default that follows another value
// (rate_limit.burst, cache.stale_ttl, adaptive_limit.max_limit) is
// Follow's or AdaptiveLimitOf's. A default_value that does not parse
// panics on first use, naming each such field, so that every test that
// reads a default fails on it. The table is read on first use rather than
// at init so that a plugin built from a broken table still runs on the
// options file alone, which regenerating its Go code needs.
var defaults = sync.OnceValue(mustReadDefaults)

// mustReadDefaults is the table of defaults of the compiled options.
func mustReadDefaults() *resilientv1.Policy {
	p := &resilientv1.Policy{}
	if err := readDefaults(p.ProtoReflect()); err != nil {
		panic("internal/rules: the options contract's defaults: " + err.Error() +
			"; mend it in options/resilient/v1/resilient.proto and regenerate its Go code alone (go tool -modfile=tools/go.mod buf generate --path options/resilient/v1/resilient.proto), then everything")
	}
	return p
}

// readDefaults sets in m every field of its message that declares a
// default_value, and the groups inside it (a message of the options, not
// a Duration) that hold such a field; a group without any is left unset,
// so that DefaultOf says it has no defaults. The error names each field
// whose default_value does not parse.
func readDefaults(m protoreflect.Message) error {
	var errs []error
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if text, ok := defaultValue(fd); ok {
			v, err := parseDefault(m, fd, text)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			m.Set(fd, v)
			continue
		}
		if !isGroup(fd) {
			continue
		}
		group := m.NewField(fd).Message()
		if err := readDefaults(group); err != nil {
			errs = append(errs, err)
		}
		if hasAny(group) {
			m.Set(fd, protoreflect.ValueOfMessage(group))
		}
	}
	return errors.Join(errs...)
}

// isGroup reports whether fd holds a group of the options: a message of
// the options' own file, as retry or server.dedup, not a Duration.
func isGroup(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && !fd.IsList() && !fd.IsMap() &&
		fd.Message().ParentFile().Path() == resilientv1.File_resilient_v1_resilient_proto.Path()
}

// hasAny reports whether m sets any field.
func hasAny(m protoreflect.Message) bool {
	found := false
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		found = true
		return false
	})
	return found
}

// defaultValue returns the (resilient.v1.default_value) that the options
// declare on fd, as written, and whether it declares one.
func defaultValue(fd protoreflect.FieldDescriptor) (string, bool) {
	opts := fd.Options()
	if opts == nil || !proto.HasExtension(opts, resilientv1.E_DefaultValue) {
		return "", false
	}
	return proto.GetExtension(opts, resilientv1.E_DefaultValue).(string), true
}

// parseDefault parses the default_value text of the field fd of m by the
// field's kind, in an override file's notation: a count as "3", a number
// as "0.5", a Duration as Go writes a time.Duration ("50ms"), a status
// code by its canonical name, a list of codes separated by commas with no
// spaces ("UNAVAILABLE,DEADLINE_EXCEEDED"), an enum value by its name.
// A string of the options that holds a default holds status codes: the
// contract has no other. Whether the value is one its field accepts is
// the checks' (TestDefaultsPassTheChecks); the error says what the text
// is not, naming the field.
func parseDefault(m protoreflect.Message, fd protoreflect.FieldDescriptor, text string) (protoreflect.Value, error) {
	v, err := parseDefaultText(m, fd, text)
	if err != nil {
		return protoreflect.Value{}, fmt.Errorf("%s: default_value %q %s", fd.FullName(), text, err)
	}
	return v, nil
}

func parseDefaultText(m protoreflect.Message, fd protoreflect.FieldDescriptor, text string) (protoreflect.Value, error) {
	switch {
	case fd.IsList() && fd.Kind() == protoreflect.StringKind:
		list := m.NewField(fd).List()
		for _, name := range strings.Split(text, ",") {
			if _, ok := ParseCode(name); !ok {
				return protoreflect.Value{}, fmt.Errorf("is not a list of status codes: write canonical code names separated by commas, with no spaces, as %q", "UNAVAILABLE,DEADLINE_EXCEEDED")
			}
			list.Append(protoreflect.ValueOfString(name))
		}
		return protoreflect.ValueOfList(list), nil
	case fd.IsList() || fd.IsMap():
	case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Duration":
		d, err := time.ParseDuration(text)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("is not a duration: write one as Go does, as %q", "10s")
		}
		return protoreflect.ValueOfMessage(durationpb.New(d).ProtoReflect()), nil
	case fd.Kind() == protoreflect.Uint32Kind:
		n, err := strconv.ParseUint(text, 10, 32)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("is not a count: write a whole number from 0 to %d, as %q", uint32(math.MaxUint32), "3")
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil
	case fd.Kind() == protoreflect.DoubleKind:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return protoreflect.Value{}, fmt.Errorf("is not a finite number: write one as %q", "0.5")
		}
		return protoreflect.ValueOfFloat64(x), nil
	case fd.Kind() == protoreflect.StringKind:
		if _, ok := ParseCode(text); !ok {
			return protoreflect.Value{}, fmt.Errorf("is not a status code: %s", suggestCode(text))
		}
		return protoreflect.ValueOfString(text), nil
	case fd.Kind() == protoreflect.EnumKind:
		ev := fd.Enum().Values().ByName(protoreflect.Name(text))
		if ev == nil {
			var names []string
			for i := range fd.Enum().Values().Len() {
				names = append(names, string(fd.Enum().Values().Get(i).Name()))
			}
			return protoreflect.Value{}, fmt.Errorf("is not a value of %s: write one of %s", fd.Enum().FullName(), strings.Join(names, ", "))
		}
		return protoreflect.ValueOfEnum(ev.Number()), nil
	}
	return protoreflect.Value{}, fmt.Errorf("cannot be read: a %s field has no notation for a default; give a default to a count, a number, a duration, a status code, a list of them or an enum", kindOf(fd))
}

// kindOf names the kind of a field as a message says it.
func kindOf(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "map"
	case fd.IsList():
		return "repeated " + fd.Kind().String()
	case fd.Message() != nil:
		return string(fd.Message().FullName())
	}
	return fd.Kind().String()
}

// DefaultOf returns the contract's defaults of a group of the options
// ("retry", "circuit_breaker", "server.dedup"), nil for a group without
// defaults (bulkhead, rate_limit). Callers must not change it.
func DefaultOf(group string) proto.Message {
	if group == "" {
		return nil // the values in no group: not a group of the options
	}
	if msg := groupAt(defaults().ProtoReflect(), group); msg != nil {
		return msg.Interface()
	}
	return nil
}
