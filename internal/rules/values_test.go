// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-resilient/resilient/internal/contract"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// TestGoChecksAreTheOptionsChecks drives the refusals from the Go side:
// for every group of the options (groups) and every number or duration of
// its Go value, each value the Go check refuses on its own
// (policy.GroupProblems) and the options can hold is written alone in an
// option, and Check must refuse it at the option's path with the Go
// check's core, followed by an options author's mend only. So a field
// added to a Go group with its check is refused in a .proto, in lint and
// in an override with no line in this package; and a check removed from
// Go is removed from every boundary.
func TestGoChecksAreTheOptionsChecks(t *testing.T) {
	bad := map[reflect.Kind][]any{
		reflect.Int:     {int64(0), int64(1 << 22), int64(math.MaxUint32)},
		reflect.Int64:   {time.Duration(0), -time.Nanosecond, 5 * time.Nanosecond, 100 * 365 * 24 * time.Hour},
		reflect.Float64: {0.0, -1.0, 0.5, 1.0, 2.0, math.NaN(), math.Inf(1)},
	}
	tried := 0
	for _, g := range groups {
		onMethod := true
		for _, pl := range placement {
			if pl.group == g.path {
				onMethod = pl.onlyOnMethod
			}
		}
		_, checked := g.value()
		for _, f := range numberFields(reflect.TypeOf(checked).Elem(), nil) {
			option := contract.OptionName(f.Name)
			for _, v := range bad[f.Type.Kind()] {
				policyOf := func(set bool) (*resilientv1.Policy, bool) {
					p := &resilientv1.Policy{}
					msg := p.ProtoReflect()
					if g.path != "" {
						for _, part := range strings.Split(g.path, ".") {
							msg = msg.Mutable(msg.Descriptor().Fields().ByName(protoreflect.Name(part))).Message()
						}
					}
					fd := msg.Descriptor().Fields().ByName(protoreflect.Name(option))
					if fd == nil {
						return nil, false
					}
					ov, ok := optionValue(fd, v)
					if ok && set {
						msg.Set(fd, ov)
					}
					return p, ok
				}
				p, ok := policyOf(true)
				if p == nil {
					t.Errorf("%s.%s has no option %s: name the Go field as the option (contract.GoName)", g.path, f.Name, option)
					break
				}
				if !ok {
					continue // the options cannot hold it (a negative count)
				}
				// The Go value of the group as Check makes it.
				dst, checked := g.value()
				_ = Fill(dst, DefaultOf(g.path))
				_ = Fill(dst, groupAt(p.ProtoReflect(), g.path).Interface())
				Follow(dst, nil, g.path, SetIn(groupAt(p.ProtoReflect(), g.path).Interface()))
				var want []string
				for _, pr := range policy.GroupProblems(checked) {
					if pr.Key == option && !pr.Pair {
						want = append(want, pr.Core)
					}
				}
				var got []string
				Check(p, onMethod, func(path, format string, args ...any) {
					if path == join(g.path, option) {
						got = append(got, fmt.Sprintf(format, args...))
					}
				})
				tried++
				if len(got) != len(want) {
					t.Errorf("%s = %v: Go refuses it with %q, the options with %q", join(g.path, option), v, want, got)
					continue
				}
				for i := range want {
					if rest, ok := strings.CutPrefix(got[i], want[i]); !ok || (rest != "" && !strings.HasPrefix(rest, "; remove it ")) {
						t.Errorf("%s = %v: the options say %q, not the Go core %q followed by an options author's mend", join(g.path, option), v, got[i], want[i])
					}
				}
			}
		}
	}
	if tried < 150 {
		t.Fatalf("only %d values tried: the groups or their fields are missed", tried)
	}
}

// numberFields are the fields of a Go group that hold a number or a
// duration, those of a struct held by value (a Shedding's Limits)
// included.
func numberFields(t reflect.Type, out []reflect.StructField) []reflect.StructField {
	for i := range t.NumField() {
		f := t.Field(i)
		switch f.Type.Kind() {
		case reflect.Struct:
			out = numberFields(f.Type, out)
		case reflect.Int, reflect.Int64, reflect.Float64:
			out = append(out, f)
		}
	}
	return out
}

// optionValue is v as the option fd holds it; false when it cannot.
func optionValue(fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, bool) {
	switch v := v.(type) {
	case time.Duration:
		if fd.Message() != nil {
			return protoreflect.ValueOfMessage(durationpb.New(v).ProtoReflect()), true
		}
	case int64:
		if fd.Kind() == protoreflect.Uint32Kind && v >= 0 && v <= math.MaxUint32 {
			return protoreflect.ValueOfUint32(uint32(v)), true
		}
	case float64:
		if fd.Kind() == protoreflect.DoubleKind {
			return protoreflect.ValueOfFloat64(v), true
		}
	}
	return protoreflect.Value{}, false
}

// TestAdaptiveMendsAsTheOptionsWriteThem: a level is checked on its own,
// so a bulkhead set at another level may be the ceiling of the limit; the
// mend of a refused max_limit or initial_limit holds either way: leaving
// max_limit out gives 100, or the bulkhead's permits when fewer
// (AdaptiveLimitOf), and initial_limit 20 held between the bounds.
func TestAdaptiveMendsAsTheOptionsWriteThem(t *testing.T) {
	zero := uint32(0)
	got := map[string]string{}
	Check(&resilientv1.Policy{AdaptiveLimit: &resilientv1.AdaptiveLimit{MaxLimit: &zero, InitialLimit: &zero}}, false, func(path, format string, args ...any) {
		got[path] = fmt.Sprintf(format, args...)
	})
	for path, want := range map[string]string{
		"adaptive_limit.max_limit":     "must be at least 1, got 0; remove it for the default 100, or the bulkhead's permits if fewer",
		"adaptive_limit.initial_limit": "must be at least 1, got 0; remove it for the default 20 (or the nearer of min_limit and max_limit when 20 is outside them)",
	} {
		if got[path] != want {
			t.Errorf("%s: %q, want %q", path, got[path], want)
		}
	}
	// What the mend promises, from the resolution the plugin writes.
	for _, tc := range []struct {
		permits, lo, hi uint32
		max, initial    int
	}{{0, 1, 0, 100, 20}, {8, 1, 0, 8, 8}, {200, 1, 0, 100, 20}, {0, 30, 50, 50, 30}, {0, 1, 10, 10, 10}} {
		a := &resilientv1.AdaptiveLimit{MinLimit: &tc.lo}
		if tc.hi != 0 {
			a.MaxLimit = &tc.hi
		}
		_, hi, initial := AdaptiveLimitOf(a, tc.permits)
		if hi != tc.max || initial != tc.initial {
			t.Errorf("%+v under %d permits: max %d, initial %d; the mend says %d and %d", a, tc.permits, hi, initial, tc.max, tc.initial)
		}
	}
}
