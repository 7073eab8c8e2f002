package override

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

// The server-side fields of the annotations (shedding and server) are read
// like the others, checked with the same rules, and applied by
// ServerOptions to the generated XxxServerPolicy; the client ignores them.
// A service's values apply to every method, as in the .proto:
//
//	services:
//	  example.inventory.v1.InventoryService:
//	    shedding: {low: 4, normal: 16}
//	    server: {min_deadline: 20ms}
//	    methods:
//	      ReserveStock:
//	        server: {dedup: {ttl: 1h, on_store_error: ON_STORE_ERROR_RUN_WITHOUT_DEDUP}}
//
//	RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__SHEDDING__LOW=4

// isServerLeaf reports whether a leaf sets a server-side value.
func isServerLeaf(l *leaf) bool {
	return l.path == "shedding" || strings.HasPrefix(l.path, "shedding.") || strings.HasPrefix(l.path, "server.")
}

// serverFieldProblem refuses the fields that neither side may override.
func serverFieldProblem(path string) string {
	if path == "priority" {
		return "priority is part of the service's contract: the generated clients send it and the server caps it, and an override on one side only would set them apart; change the .proto and regenerate"
	}
	return ""
}

// convertServer reads the values only the server-side fields have: the
// shedding code (a string) and on_store_error (an enum, by its name). ok
// is false for any other field.
func convertServer(fd protoreflect.FieldDescriptor, raw any) (v any, ok bool, err error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		s, isText := raw.(string)
		if !isText {
			return nil, true, fmt.Errorf(`must be a status code name, "UNAVAILABLE" or "RESOURCE_EXHAUSTED", got %s`, show(raw))
		}
		return s, true, nil
	case protoreflect.EnumKind:
		s, _ := raw.(string)
		values := fd.Enum().Values()
		var names []string
		for i := range values.Len() {
			ev := values.Get(i)
			if ev.Number() == 0 {
				continue // _UNSPECIFIED says nothing
			}
			if string(ev.Name()) == s {
				return ev.Number(), true, nil
			}
			names = append(names, string(ev.Name()))
		}
		return nil, true, fmt.Errorf("must be one of %s, got %s", strings.Join(names, ", "), show(raw))
	}
	return nil, false, nil
}

// ServerOptions returns the options of server.NewGuard that apply the
// server-side overrides of service p (a generated XxxServerPolicy):
// shedding limits, pushback and code, minimum deadlines, default timeouts,
// and the TTL, lease and store-error choice of an annotated dedup. It
// refuses, naming the keys, what the rules refuse once the overrides meet
// the annotated policy: limits that are no longer cumulative, a shedding
// added without all four limits, dedup on a method that does not
// deduplicate. None when nothing overrides p's server side. The Set is
// loaded with the generated client policy of the same service
// (XxxResilientPolicy), which names its methods.
func (s *Set) ServerOptions(p *policy.Server) ([]server.Option, error) {
	if s == nil || p == nil {
		return nil, nil
	}
	t := s.targets[p.Name]
	if t == nil {
		return nil, nil
	}
	var leaves []*leaf
	for _, l := range t.ordered() {
		if isServerLeaf(l) {
			leaves = append(leaves, l)
		}
	}
	if len(leaves) == 0 {
		return nil, nil
	}
	apply := func(c *policy.Server) error {
		var errs problems
		for _, l := range leaves {
			if err := applyServerLeaf(c, l); err != nil {
				errs.add(l.source, "%v", err)
			}
		}
		if len(errs) > 0 {
			return errs.err()
		}
		return nil
	}
	c := p.Clone()
	if err := apply(&c); err != nil {
		return nil, err
	}
	if sh := c.Shedding; sh != nil {
		var errs problems
		l := sh.Limits
		u := func(v int) *uint32 {
			if v == 0 {
				return nil // an added shedding whose limit nobody set
			}
			n := uint32(v)
			return &n
		}
		rules.SheddingLimits(u(l.Low), u(l.Normal), u(l.High), u(l.Critical), func(path, format string, args ...any) {
			// The limit at fault, or, when it is the annotation's, the
			// override that put it out of order.
			if lf := t.find("", path); lf != nil {
				errs.add(lf.source, format, args...)
				return
			}
			where := "overrides of " + t.name // none touched shedding: the policy given was wrong
			if lf := t.find("", "shedding"); lf != nil {
				where = lf.source
			}
			errs.add(where, "%s: "+format, append([]any{path}, args...)...)
		})
		if len(errs) > 0 {
			return nil, errs.err()
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("overrides of %s (%s): %w", t.name, strings.Join(sources(leaves), ", "), err)
	}
	// Applied after the program's own edits, which may have taken a group
	// away since: refused then, never dropped.
	return []server.Option{server.WithCheckedPolicy(p.Name, apply)}, nil
}

// applyServerLeaf sets one server-side value in p: a service's value in
// every method it concerns.
func applyServerLeaf(p *policy.Server, l *leaf) error {
	group, field, _ := strings.Cut(l.path, ".")
	if group == "shedding" {
		if p.Shedding == nil {
			p.Shedding = &policy.Shedding{}
		}
		// The four limits go to Limits, pushback and code to the
		// Shedding, as the plugin fills them.
		return set(&struct {
			*policy.Limits
			*policy.Shedding
		}{&p.Shedding.Limits, p.Shedding}, l.path, l.value)
	}
	for i := range p.Methods {
		m := &p.Methods[i]
		if l.method != "" && methodName(m.Name) != l.method {
			continue
		}
		switch field {
		case "min_deadline", "default_timeout":
			if err := set(m, l.path, l.value); err != nil {
				return err
			}
		default: // dedup.ttl, dedup.lease, dedup.on_store_error
			if m.Dedup == nil {
				if l.method == "" {
					continue // a service's dedup values concern the methods that deduplicate
				}
				return errors.New("the method does not deduplicate: dedup needs the request's idempotency key and the response type, which only the .proto can give; annotate server.dedup there and regenerate")
			}
			switch field {
			case "dedup.ttl", "dedup.lease":
				if msg := rules.DedupMinimum(strings.TrimPrefix(field, "dedup."), l.value.(time.Duration)); msg != "" {
					return errors.New(msg)
				}
				if err := set(m.Dedup, l.path, l.value); err != nil {
					return err
				}
			case "dedup.on_store_error":
				m.Dedup.OnStoreError = policy.StoreErrorRefuse
				if l.value.(protoreflect.EnumNumber) == protoreflect.EnumNumber(resilientv1.OnStoreError_ON_STORE_ERROR_RUN_WITHOUT_DEDUP) {
					m.Dedup.OnStoreError = policy.StoreErrorRunWithoutDedup
				}
			}
		}
	}
	return nil
}
