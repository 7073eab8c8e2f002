package runtime

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/internal/adaptive"
	"github.com/go-resilient/resilient/runtime/internal/throttle"
	"github.com/go-resilient/resilient/runtime/policy"
)

// describe renders the policy in force as text for an operator: the
// service's groups first, one line each, then one paragraph per method.
// Every value is one of policy.Service.Settings, written under the name an
// override file gives it ("cool_down 2s"), so a field added to a group is
// described without a change here. The groups and their order are read
// from the types by reflection: a pointer to a struct is a group. A method
// says of each group the service can share (a field of both types: the
// breaker, the bulkhead, the rate limit, the adaptive limit) whether it has
// its own, shares the service's or has none, where the group applies to
// its kind.
func describe(p *policy.Service) string {
	in := inForce(p)
	var svc []policy.Setting
	byMethod := map[string][]policy.Setting{}
	for _, s := range in.Settings() {
		if rest, ok := strings.CutPrefix(s.Key, "methods."); ok {
			name, key, _ := strings.Cut(rest, ".")
			byMethod[name] = append(byMethod[name], policy.Setting{Key: key, Value: s.Value})
			continue
		}
		svc = append(svc, s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", p.Name)
	serviceGroups := groupsOf(reflect.TypeFor[policy.Service]())
	methodGroups := groupsOf(reflect.TypeFor[policy.Method]())
	shareable := map[string]bool{}
	for _, g := range methodGroups {
		shareable[g] = slices.Contains(serviceGroups, g)
	}
	service := split(svc)
	for _, s := range service.scalars {
		fmt.Fprintf(&b, "  %s: %s\n", s.Key, s.Value)
	}
	for _, g := range serviceGroups {
		fields, ok := service.groups[g]
		if !ok {
			continue
		}
		label := ""
		switch {
		case service.none[g]:
		case shareable[g]:
			label = " (shared)"
		case g == "retry_budget" && p.Budget == nil:
			label = " (default: the service sets none, and a method retries or hedges)"
		}
		fmt.Fprintf(&b, "  %s%s: %s\n", g, label, pairs(fields, service.none[g]))
	}
	for i := range in.Methods {
		m := &in.Methods[i]
		fmt.Fprintf(&b, "  %s\n", m.Name)
		own := split(byMethod[shortName(m.Name)])
		b.WriteString("    " + m.Kind.String())
		for _, s := range own.scalars {
			fmt.Fprintf(&b, ", %s: %s", s.Key, s.Value)
		}
		b.WriteString("\n")
		for _, g := range methodGroups {
			fields, has := own.groups[g]
			switch {
			case shareable[g] && !has && m.Kind != policy.KindUnary && unaryOnly[g]:
			case shareable[g] && !has && service.has(g):
				fmt.Fprintf(&b, "    %s: shared\n", g)
			case shareable[g] && !has:
				fmt.Fprintf(&b, "    %s: none\n", g)
			case has:
				label := ""
				if shareable[g] {
					label = " (own)"
				}
				line := pairs(fields, own.none[g])
				if g == "retry" && m.Retry != nil && m.Retry.MaxAttempts <= 1 {
					// One attempt in all: the retry's other values do nothing.
					line = fmt.Sprintf("none (max_attempts %d)", m.Retry.MaxAttempts)
				}
				if g == "cache" && m.Cache != nil {
					// What the key is made of binds generated code: not a
					// setting, but the operator reads it here.
					line += ", key_fields " + fmt.Sprint(m.Cache.KeyFields)
				}
				fmt.Fprintf(&b, "    %s%s: %s\n", g, label, line)
			}
		}
	}
	return b.String()
}

// unaryOnly are the groups a stream does not go through: opening a stream
// takes no token of the rate limit, and its lifetime says nothing of the
// dependency's latency to an adaptive limit.
var unaryOnly = map[string]bool{"rate_limit": true, "adaptive_limit": true}

// described is one level's settings, split: its values outside any group,
// in order, and each group's fields (or its "none").
type described struct {
	scalars []policy.Setting
	groups  map[string][]policy.Setting
	none    map[string]bool
}

func (d described) has(group string) bool { _, ok := d.groups[group]; return ok && !d.none[group] }

// split sorts one level's settings (keys relative to it: "timeout",
// "retry.max_attempts", "retry" for a retry listed as none) into scalars
// and groups.
func split(ss []policy.Setting) described {
	d := described{groups: map[string][]policy.Setting{}, none: map[string]bool{}}
	groups := map[string]bool{}
	for _, g := range append(groupsOf(reflect.TypeFor[policy.Service]()), groupsOf(reflect.TypeFor[policy.Method]())...) {
		groups[g] = true
	}
	for _, s := range ss {
		group, field, inGroup := strings.Cut(s.Key, ".")
		switch {
		case inGroup:
			d.groups[group] = append(d.groups[group], policy.Setting{Key: field, Value: s.Value})
		case groups[s.Key]:
			d.groups[s.Key], d.none[s.Key] = nil, true
		default:
			d.scalars = append(d.scalars, s)
		}
	}
	return d
}

// pairs writes a group's fields as "name value, name value", or "none".
func pairs(fields []policy.Setting, none bool) string {
	if none {
		return "none"
	}
	counted := slices.ContainsFunc(fields, func(f policy.Setting) bool { return f.Key == "window_calls" })
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.Key + " " + f.Value
		if f.Key == "window" && counted {
			// A breaker's window in time gives way to its count.
			out[i] += " (ignored: window_calls is set)"
		}
	}
	return strings.Join(out, ", ")
}

// groupsOf names the groups of a policy type, in the order of its fields:
// the fields that point to a struct, by their option names.
func groupsOf(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			out = append(out, contract.OptionName(f.Name))
		}
	}
	return out
}

// inForce returns a copy of p with the values the runtime uses where p
// leaves them to a default: the zero fields of an adaptive limit (its
// maximum capped by the bulkhead it sits under) and of the throttler.
// A field that is set is kept as set.
func inForce(p *policy.Service) *policy.Service {
	q := p.Clone()
	limit := func(a *policy.AdaptiveLimit, b *policy.Bulkhead) {
		if a == nil {
			return
		}
		ap := adaptive.Policy(*a)
		if b != nil {
			ap = ap.WithCeiling(b.Permits)
		}
		if l, err := adaptive.New(ap, time.Time{}); err == nil {
			fillZeros(a, policy.AdaptiveLimit(l.Policy()))
		}
	}
	limit(q.AdaptiveLimit, q.Bulkhead)
	for i := range q.Methods {
		m := &q.Methods[i]
		b := m.Bulkhead
		if b == nil {
			b = q.Bulkhead
		}
		limit(m.AdaptiveLimit, b)
	}
	if t := q.ClientThrottle; t != nil {
		if th, err := throttle.New(throttle.Policy(*t), time.Time{}, nil); err == nil {
			fillZeros(t, policy.Throttle(th.Policy()))
		}
	}
	return &q
}

// fillZeros sets each zero field of the struct dst points to from src.
func fillZeros[T any](dst *T, src T) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	for i := range d.NumField() {
		if d.Field(i).IsZero() {
			d.Field(i).Set(s.Field(i))
		}
	}
}
