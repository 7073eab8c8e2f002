package override

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
	"github.com/go-resilient/resilient/runtime/policy"
)

// check applies to each overridden policy the rules the plugin applies to
// each annotation (internal/rules), naming the key of each problem and
// setting aside the leaf at fault, so that apply meets only values that
// are right on their own and every problem is reported at once.
func (t *service) check(errs *problems) {
	for _, method := range slices.Sorted(maps.Keys(t.values)) {
		rules.Check(t.values[method], method != "", func(path, format string, args ...any) {
			errs.add(t.key(method, path), "%s", inOverride(fmt.Sprintf(format, args...)))
			// Every value of a refused group is set aside, not only its
			// first: applied on its own, another would make a group the
			// rules refused and a second, false problem of it.
			for _, l := range t.leaves {
				if l.method == method && under(l.path, path) && (l.env || !t.hasEnv(method, l.path)) {
					l.bad = true
				}
			}
		})
	}
	// The file's values that a variable sets again are checked as the
	// file wrote them: the variable wins, but the file is still wrong.
	for _, method := range slices.Sorted(maps.Keys(t.fileValues)) {
		rules.Check(t.fileValues[method], method != "", func(path, format string, args ...any) {
			l := t.fileLeafAt(method, path)
			if l == nil || t.leafAt(method, path) == l {
				return // not set again by a variable: reported above
			}
			field, index, _ := strings.Cut(path, "[")
			if index != "" {
				index = "[" + index
			}
			errs.add(l.keyFor(field)+index, "%s", inOverride(fmt.Sprintf(format, args...)))
			for _, l := range t.leaves {
				if !l.env && l.method == method && under(l.path, path) {
					l.bad = true
				}
			}
		})
	}
}

// inOverride rewords a rule's advice for an override file: in a .proto,
// removing a value gives its default ("remove it for the default 10s",
// "remove it to count no call as slow"), but removing an override gives
// back the annotated value, which may be another.
func inOverride(msg string) string {
	for _, advice := range []string{"remove it for ", "remove it to "} {
		if i := strings.LastIndex(msg, advice); i >= 0 {
			return msg[:i] + "remove this override to keep the annotated value"
		}
	}
	return msg
}

// leafAt returns the leaf of method that set path
// ("retry.retryable_codes[1]", "retry_budget") or a field under it, the
// variable's where a variable and the file both did.
func (t *service) leafAt(method, path string) *leaf {
	field, _, _ := strings.Cut(path, "[")
	for _, l := range t.leaves {
		if l.method == method && (l.path == field || strings.HasPrefix(l.path, field+".")) && (l.env || !t.hasEnv(method, l.path)) {
			return l
		}
	}
	return nil
}

// under reports whether the leaf at path is the value at rule (a path of
// the rules, an index in brackets left out) or inside it.
func under(path, rule string) bool {
	field, _, _ := strings.Cut(rule, "[")
	return path == field || strings.HasPrefix(path, field+".")
}

// fileLeafAt is leafAt among the file's leaves.
func (t *service) fileLeafAt(method, path string) *leaf {
	field, _, _ := strings.Cut(path, "[")
	for _, l := range t.leaves {
		if !l.env && l.method == method && (l.path == field || strings.HasPrefix(l.path, field+".")) {
			return l
		}
	}
	return nil
}

// hasEnv reports whether a variable sets path of method.
func (t *service) hasEnv(method, path string) bool {
	for _, l := range t.leaves {
		if l.env && l.method == method && l.path == path {
			return true
		}
	}
	return false
}

// key names the key of path ("retry.max_attempts", "retry.retryable_codes[1]",
// "retry_budget") in the overrides of method, from the leaf that set it or
// one of its fields.
func (t *service) key(method, path string) string {
	field, index, _ := strings.Cut(path, "[")
	if index != "" {
		index = "[" + index
	}
	if l := t.leafAt(method, path); l != nil {
		return l.keyFor(field) + index
	}
	return t.name + ": " + path
}

// find returns the leaf that set path, or a field under it, last among
// those that concern method (its own and the service's, in the order they
// apply); nil for none.
func (t *service) find(method, path string) *leaf {
	ordered := t.ordered()
	for i := len(ordered) - 1; i >= 0; i-- {
		l := ordered[i]
		if (l.method == method || l.method == "") && (l.path == path || strings.HasPrefix(l.path, path+".")) {
			return l
		}
	}
	return nil
}

// ordered returns the leaves in the order they apply (the README's table
// of precedence): source first, the file's before the variables'; then
// level, within one source the service's before each method's, in the
// order of the policy, a method's per_method before its other values. So
// a variable wins over the file whatever the level of either, and within
// one source a method's value wins over its service's.
func (t *service) ordered() []*leaf {
	var out []*leaf
	for _, env := range []bool{false, true} {
		for _, l := range t.leaves {
			if l.env == env && l.method == "" {
				out = append(out, l)
			}
		}
		for i := range t.policy.Methods {
			name := methodName(t.policy.Methods[i].Name)
			for pass := range 2 {
				for _, l := range t.leaves {
					if l.env == env && l.method == name && strings.HasSuffix(l.path, ".per_method") == (pass == 0) {
						out = append(out, l)
					}
				}
			}
		}
	}
	return out
}

// apply applies every override that is right on its own to p, a copy of
// the annotated policy, and checks the result with the runtime's own
// check (policy.Service.Problems): what involves several values (retries on
// a method that may not be repeated, a timeout longer than the overall
// one, a backoff range upside down) is refused naming the key that made it
// so, in the same report as every other problem.
func (t *service) apply(p policy.Service) (*policy.Service, error) {
	var errs problems
	for _, l := range t.ordered() {
		if l.bad {
			continue // refused on its own (check)
		}
		if err := t.applyLeaf(&p, l); err != nil {
			errs.add(l.source, "%v", err)
			l.bad = true
		}
	}
	// What only an override can leave out: a group it adds without the
	// value the group has no default for (the plugin refuses the same
	// in a .proto, rules.CheckService and friends).
	required := map[[2]string]bool{}
	require := func(method, group, key, msg string, missing bool) {
		if !missing {
			return
		}
		if l := t.find(method, group); l != nil {
			errs.add(l.keyFor(key), "%s", msg)
			required[[2]string{method, key}] = true
		}
	}
	bulkheadMissing := "is required: the annotation has no bulkhead here, and an override that adds one must set the number of calls allowed in flight at once, as in bulkhead: {permits: 16}"
	rateMissing := "is required: the annotation has no rate limit here, and an override that adds one must set the rate, as in rate_limit: {requests_per_second: 200}"
	require("", "bulkhead", "bulkhead.permits", bulkheadMissing, p.Bulkhead != nil && p.Bulkhead.Permits == 0)
	require("", "rate_limit", "rate_limit.requests_per_second", rateMissing, p.RateLimit != nil && p.RateLimit.RequestsPerSecond == 0)
	for i := range p.Methods {
		m := &p.Methods[i]
		name := methodName(m.Name)
		require(name, "bulkhead", "bulkhead.permits", bulkheadMissing, m.Bulkhead != nil && m.Bulkhead.Permits == 0)
		require(name, "rate_limit", "rate_limit.requests_per_second", rateMissing, m.RateLimit != nil && m.RateLimit.RequestsPerSecond == 0)
		require(name, "hedging", "hedging.delay",
			"is required: the annotation has no hedging here, and an override that adds it must set how long to wait before the next copy, about the method's p95, as in hedging: {delay: 80ms}",
			m.Hedging != nil && m.Hedging.Delay == 0)
	}
	// A new time window over a breaker that counts calls would change
	// nothing: the runtime reads window only without window_calls. (The
	// value in force written back, as the policy page lists it, is kept.)
	breakerOf := func(q *policy.Service, method string) *policy.Breaker {
		for i := range q.Methods {
			if methodName(q.Methods[i].Name) == method && q.Methods[i].Breaker != nil {
				return q.Methods[i].Breaker
			}
		}
		return q.Breaker
	}
	for _, l := range t.leaves {
		if l.bad || l.path != "circuit_breaker.window" {
			continue
		}
		b, was := breakerOf(&p, l.method), breakerOf(t.policy, l.method)
		if b != nil && b.WindowCalls > 0 && (was == nil || was.Window != b.Window) {
			errs.add(l.source, "would change nothing: the breaker counts over its last %d calls (window_calls), not over a stretch of time; override window_calls instead", b.WindowCalls)
		}
	}
	// Everything else the runtime's own check refuses (runtime.NewClient
	// runs the same), in its words for an operator (the options' names,
	// policy.Problem.OptionsMessage), at the key of the override that made
	// it so. A value of the service wrong in the same words for several
	// methods is one problem, at its key, naming them (atService).
	atService := map[[2]string]*sharedProblem{}
	for _, pr := range p.Problems() {
		if required[[2]string{pr.Method, pr.Key}] || t.refusedNear(pr.Method, pr.Key, pr.With) {
			continue // already reported
		}
		l, key := t.culprit(pr.Method, pr.Key, pr.With)
		if l == nil {
			// No override touched it, yet it is wrong only with them.
			errs.add(fmt.Sprintf("overrides of %s (%s)", t.name, strings.Join(sources(t.leaves), ", ")), "%s: %s", pr.Field, pr.OptionsMessage)
			continue
		}
		msg := pr.OptionsMessage
		if pr.Method == "" || strings.Contains(msg, pr.Method) {
			errs.add(l.keyFor(key), "%s", msg)
			continue
		}
		if l.method != "" {
			errs.add(l.keyFor(key), "in %s, %s", pr.Method, msg)
			continue
		}
		id := [2]string{l.keyFor(key), msg}
		sp := atService[id]
		if sp == nil {
			sp = &sharedProblem{at: len(errs)}
			atService[id] = sp
			errs.add("", "")
		}
		sp.methods = append(sp.methods, pr.Method)
		errs[sp.at] = fmt.Sprintf("%s: in %s, %s", id[0], rules.MethodList(sp.methods, len(p.Methods)), msg)
	}
	if len(errs) > 0 || t.refused() {
		return nil, errs.err() // nil when check reported them all
	}
	return &p, nil
}

// sharedProblem is a problem of a value set on the service, the same for
// each of methods: reported once, at errs[at].
type sharedProblem struct {
	at      int
	methods []string
}

// refusedNear reports whether an override refused on its own set the
// value at key of method, or one of with, the values that make it wrong
// together with it (policy.Problem.With): the problem is then the
// refused value's, already reported.
func (t *service) refusedNear(method, key string, with []string) bool {
	for _, l := range t.leaves {
		if !l.bad || (l.method != method && l.method != "") {
			continue
		}
		for _, k := range append([]string{key}, with...) {
			if l.path == k || strings.HasPrefix(l.path, k+".") || strings.HasPrefix(k, l.path+".") {
				return true
			}
		}
	}
	return false
}

// culprit returns the override to blame for a problem at key of method
// ("" for the service), and the key to name it by: the override of that
// value, else of one of with, the values that make it wrong together with
// it (policy.Problem.With), else one inside either ("retry" for a
// retry.max_attempts that made the retries). Nil when no override touched
// it.
func (t *service) culprit(method, key string, with []string) (*leaf, string) {
	if l := t.blame(method, key); l != nil {
		return l, key
	}
	if l := t.blame(method, with...); l != nil {
		return l, l.path
	}
	for _, k := range append([]string{key}, with...) {
		if l := t.find(method, k); l != nil && !l.bad {
			return l, k
		}
	}
	return nil, ""
}

// blame returns the leaf that set one of paths for method, last in the
// order the leaves apply: the one whose value is in force.
func (t *service) blame(method string, paths ...string) *leaf {
	ordered := t.ordered()
	for i := len(ordered) - 1; i >= 0; i-- {
		l := ordered[i]
		if (l.method == method || l.method == "") && slices.Contains(paths, l.path) && !l.bad {
			return l
		}
	}
	return nil
}

// refused reports whether some leaf was refused on its own.
func (t *service) refused() bool {
	for _, l := range t.leaves {
		if l.bad {
			return true
		}
	}
	return false
}

// sources names where each leaf was set: a key of the file, or a variable.
func sources(leaves []*leaf) []string {
	out := make([]string, len(leaves))
	for i, l := range leaves {
		out[i] = l.source
	}
	return out
}

// applyLeaf sets one overridden value in p: a service's value in every
// method it concerns, as a service annotation does. Which policy a group
// lives in (the service's shared one, a method's own) is decided here;
// the value is written by set, by the runtime field's name.
func (t *service) applyLeaf(p *policy.Service, l *leaf) error {
	if isServerLeaf(l) {
		return nil // for the server: ServerOptions
	}
	group, field, _ := strings.Cut(l.path, ".")
	var methods []*policy.Method
	for i := range p.Methods {
		if l.method == "" || methodName(p.Methods[i].Name) == l.method {
			methods = append(methods, &p.Methods[i])
		}
	}
	if field == "" { // timeout, overall_timeout
		for _, m := range methods {
			if err := set(m, l.path, l.value); err != nil {
				return err
			}
		}
		return nil
	}
	switch group {
	case "retry":
		for _, m := range methods {
			if m.Kind != policy.KindUnary {
				if l.method != "" {
					return fmt.Errorf("streams are not retried, and %s is a streaming method: remove this override", l.method)
				}
				continue // a stream ignores the retries of its service, as in the .proto
			}
			if m.Retry == nil {
				m.Retry = withDefaults[policy.Retry]("retry")
			}
			if err := set(m.Retry, l.path, l.value); err != nil {
				return err
			}
		}
		return nil
	case "client_throttle": // the rules refuse it on a method
		if p.ClientThrottle == nil {
			p.ClientThrottle = &policy.Throttle{} // the runtime's defaults
		}
		return set(p.ClientThrottle, l.path, l.value)
	case "retry_budget":
		if p.Budget == nil {
			b := policy.DefaultBudget
			p.Budget = &b
		}
		return set(p.Budget, l.path, l.value)
	case "hedging":
		m := methods[0] // the rules refuse hedging on a service
		if m.Kind != policy.KindUnary {
			return fmt.Errorf("streams are not hedged, and %s is a streaming method: remove this override", l.method)
		}
		if m.Hedging == nil {
			m.Hedging = withDefaults[policy.Hedging]("hedging")
		}
		return set(m.Hedging, l.path, l.value)
	case "cache":
		m := methods[0] // the rules refuse a cache on a service
		if m.Cache == nil {
			return errors.New("the method has no cache annotated: its key is generated from the cache's key_fields in the .proto; add the cache there and regenerate")
		}
		return t.setFollowing(m.Cache, group, field, l)
	}
	return t.applyShared(p, methods, group, field, l)
}

// shareable are the groups a service's methods share unless a method has
// its own (per_method): how to name them, and a new one.
var shareable = map[string]struct {
	name, tune string
	empty      func() any // a new group: the contract's defaults, or what the override must complete
}{
	"circuit_breaker": {"circuit breaker", "the breaker", func() any { return withDefaults[policy.Breaker]("circuit_breaker") }},
	"bulkhead":        {"bulkhead", "the bulkhead", func() any { return &policy.Bulkhead{} }},
	"rate_limit":      {"rate limit", "the limit", func() any { return &policy.RateLimit{} }},
	"adaptive_limit":  {"adaptive limit", "the limit", func() any { return &policy.AdaptiveLimit{} }},
}

// applyShared sets a value of a circuit breaker, bulkhead or rate limit:
// on the service, the shared one (added from the defaults when the
// annotation has none); on a method, its own, which per_method: true gives
// it as a copy of the shared one and per_method: false takes away.
func (t *service) applyShared(p *policy.Service, methods []*policy.Method, group, field string, l *leaf) error {
	g, ok := shareable[group]
	if !ok {
		return fmt.Errorf("%s cannot be overridden", l.path)
	}
	if group == "rate_limit" && l.method != "" && methods[0].Kind != policy.KindUnary {
		// As the plugin refuses it: opening a stream takes no token, so
		// the limit would be shown in force and do nothing.
		return fmt.Errorf("streams do not go through the rate limit, and %s is a streaming method: remove this override", l.method)
	}
	goName := contract.GoName(group)
	shared := reflect.ValueOf(p).Elem().FieldByName(goName)
	target := shared
	if l.method != "" {
		target = reflect.ValueOf(methods[0]).Elem().FieldByName(goName)
		if field == "per_method" {
			switch {
			case !l.value.(bool) && shared.IsNil() && !target.IsNil():
				// Back to the service's would be back to none: an override
				// does not take a protection away.
				return fmt.Errorf("the service shares no %s, so per_method: false would leave %s with none: an override sets values, it does not take one away; remove this override", g.name, l.method)
			case !l.value.(bool):
				target.SetZero() // back to the service's
			case target.IsNil() && !shared.IsNil():
				c := reflect.New(shared.Type().Elem())
				c.Elem().Set(shared.Elem())
				target.Set(c)
			case target.IsNil():
				target.Set(reflect.ValueOf(g.empty()))
			}
			return nil
		}
		if target.IsNil() {
			return fmt.Errorf("the method has no %s of its own: add %s.per_method: true beside this value to give it one, or, to tune %s the service's methods share, set this value on the service", g.name, group, g.tune)
		}
	} else if target.IsNil() {
		target.Set(reflect.ValueOf(g.empty()))
	}
	if group == "bulkhead" && field == "permits" {
		t.movePermits(p, methods, target.Interface().(*policy.Bulkhead), l)
	}
	return t.setFollowing(target.Interface(), group, field, l)
}

// movePermits moves, before the bulkhead b takes the permits of l, the
// ceiling of each adaptive limit b holds (rules.FollowPermits): the
// method's own under its own bulkhead; under the service's, the shared
// limit and each method's own whose method has no bulkhead of its own.
// A max_limit or initial_limit that was its default under the old permits
// moves, as the .proto with the new permits has it; before, the literal's
// ceiling stayed, so that fewer permits were refused naming a max_limit
// nobody wrote and more kept the old ceiling.
func (t *service) movePermits(p *policy.Service, methods []*policy.Method, b *policy.Bulkhead, l *leaf) {
	permits, ok := l.value.(uint32)
	if !ok {
		return // set refuses it
	}
	follow := func(a *policy.AdaptiveLimit, method string) {
		rules.FollowPermits(a, b.Permits, int(min(permits, math.MaxInt32)), t.setsIn(method, "adaptive_limit"))
	}
	if l.method != "" {
		follow(methods[0].AdaptiveLimit, l.method)
		return
	}
	follow(p.AdaptiveLimit, "")
	for i := range p.Methods {
		if m := &p.Methods[i]; m.Bulkhead == nil {
			follow(m.AdaptiveLimit, methodName(m.Name))
		}
	}
}

// setsIn reports, for rules.Follow and rules.FollowPermits, whether an
// override of the method's (or the service's, method "") group sets the
// option of that name.
func (t *service) setsIn(method, group string) func(option string) bool {
	return func(option string) bool {
		for _, o := range t.leaves {
			if o.method == method && o.path == group+"."+option && !o.bad {
				return true
			}
		}
		return false
	}
}

// setFollowing is set for a group with values that follow another
// (rules.Follow): a burst that was its rate's default moves with the
// rate, a stale_ttl that was its fresh_ttl with fresh_ttl, unless an
// override of the same policy sets it.
func (t *service) setFollowing(target any, group, field string, l *leaf) error {
	was := reflect.New(reflect.TypeOf(target).Elem())
	was.Elem().Set(reflect.ValueOf(target).Elem())
	if err := set(target, l.path, l.value); err != nil {
		return err
	}
	rules.Follow(target, was.Interface(), group, t.setsIn(l.method, group))
	return nil
}

// set writes the overridden value v at path ("retry.max_attempts",
// "timeout", "server.min_deadline") into the runtime policy target points
// to (the group's, or a method's for a value outside a group), with the
// code the plugin fills the generated literal with (rules.Fill): the
// field of the same name in camel case. A field the runtime has no place
// for is an error: the option is then not wired through
// (TestEveryOptionFieldIsWired).
func set(target any, path string, v any) error {
	msg := (&resilientv1.Policy{}).ProtoReflect()
	put(msg, path, v)
	parts := strings.Split(path, ".")
	for _, part := range parts[:len(parts)-1] { // to the message that holds the value
		msg = msg.Get(msg.Descriptor().Fields().ByName(protoreflect.Name(part))).Message()
	}
	if err := rules.Fill(target, msg.Interface()); err != nil {
		return fmt.Errorf("%s cannot be overridden: %w", parts[len(parts)-1], err)
	}
	return nil
}

// withDefaults returns a new policy of group ("retry", "circuit_breaker",
// "hedging") holding the contract's defaults, as a .proto that adds the
// group with {} has it.
func withDefaults[T any](group string) *T {
	v := new(T)
	rules.Fill(v, rules.DefaultOf(group)) //nolint:errcheck // the contract's defaults fit the runtime's types (tested)
	return v
}
