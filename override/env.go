package override

import (
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/runtime/policy"
)

// EnvPrefix starts the name of every variable that overrides a value.
// The rest of the name is the service (its full name in upper case, dots
// as "_"), then, for a method, METHODS and the method's name in upper
// case, then the field path of the annotation in upper case, each part
// separated by "__":
//
//	RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__RETRY_BUDGET__RATIO=0.2
//	RESILIENT__EXAMPLE_INVENTORY_V1_INVENTORYSERVICE__METHODS__GETSTOCK__RETRY__MAX_ATTEMPTS=2
//
// Values are written as in the file; a list of codes is comma-separated
// (UNAVAILABLE,DEADLINE_EXCEEDED). A variable whose name starts with
// RESILIENT in any case but is not spelled so (one underscore, lower
// case, a part joined by "_" instead of "__") is refused with the name it
// must have, never ignored.
const EnvPrefix = "RESILIENT__"

// envFamily starts, in any case, every name the loader reads: a variable
// of this family that does not parse is a mistake, not someone else's.
const envFamily = "RESILIENT"

// EnvName returns the variable that overrides the field path ("timeout",
// "retry.max_attempts") of a service, or of one of its methods when method
// is not "".
func EnvName(service, method, path string) string {
	name := EnvPrefix + envService(service)
	if method != "" {
		name += "__METHODS__" + strings.ToUpper(method)
	}
	return name + "__" + strings.ToUpper(strings.ReplaceAll(path, ".", "__"))
}

func envService(name string) string { return strings.ToUpper(strings.ReplaceAll(name, ".", "_")) }

// parseEnv reads the variables of environ whose names start with
// RESILIENT, in any case.
func (s *Set) parseEnv(environ []string, known map[string]*policy.Service, errs *problems) {
	seen := map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(strings.ToUpper(name), envFamily) {
			continue
		}
		// An environment may hold a name twice (built by hand, or passed
		// on by a program that appended to it): which one a process sees
		// depends on who reads it, so neither is chosen here.
		if first, twice := seen[name]; twice {
			if first != value {
				errs.add(name, "is set twice in the environment, to %q and to %q: keep one", first, value)
			}
			continue
		}
		seen[name] = value
		var own problems
		strict := name
		if !strings.HasPrefix(name, EnvPrefix) || name != strings.ToUpper(name) {
			// Read as the loader would read its proper spelling, to say
			// what is wrong beyond the spelling.
			strict = EnvPrefix + strings.TrimLeft(strings.ToUpper(name)[len(envFamily):], "_")
		}
		l := s.parseVar(strict, value, known, &own)
		switch {
		case len(own) == 0 && strict == name:
			s.target(l.service, known).set(l.leaf)
		case len(own) == 0:
			// Read right once spelled right: that is the name it must
			// have (the lenient respelling below may read another
			// service into it, pkg.A_B for pkg.AB's name).
			errs.add(name, "not read: the variable that overrides this value must be named %s (upper case, %s, parts joined by \"__\")", strict, EnvPrefix)
		default:
			if want := respell(name, known); want != "" && want != name {
				// The name means one value, spelled otherwise: say how.
				errs.add(name, "not read: the variable that overrides this value must be named %s (upper case, %s, parts joined by \"__\")", want, EnvPrefix)
				continue
			}
			for _, p := range own {
				if strict != name {
					p = name + " (read as " + strict + ")" + strings.TrimPrefix(p, strict)
				}
				*errs = append(*errs, p)
			}
		}
	}
}

// envLeaf is a value read from a variable, for the service it overrides.
type envLeaf struct {
	service string
	leaf    *leaf
}

// parseVar reads one variable named name, well spelled, adding to errs
// what is wrong with it.
func (s *Set) parseVar(name, value string, known map[string]*policy.Service, errs *problems) envLeaf {
	// The service's part is found by the services' own spellings, not by
	// splitting at "__": a package part or a name may start or end with
	// "_" (shop._internal.v1), and its part then holds "__" itself.
	rest := name[len(EnvPrefix):]
	var p *policy.Service
	var alike []string
	spelled := ""
	for _, k := range known {
		if e := envService(k.Name); startsWith(rest, e) {
			alike = append(alike, k.Name)
		}
	}
	alike = plausible(alike, func(k string) bool { return spells(rest, envService(k), true) })
	for _, k := range alike {
		p, spelled = known[k], envService(k)
	}
	parts := strings.Split(rest, "__")
	if p != nil {
		parts = append([]string{spelled}, splitParts(rest[len(spelled):])...)
	}
	if len(alike) > 1 {
		// a.b_c.S and a_b.c.S, or pkg.Svc and pkg.SVC: one variable name
		// for two services, and no way to tell which is meant.
		slices.Sort(alike)
		errs.add(name, "means each of %s, whose variables are spelled alike: override them in the file instead, by their full names", strings.Join(alike, " and "))
		return envLeaf{}
	}
	if p == nil {
		var names []string
		for _, k := range known {
			names = append(names, EnvPrefix+envService(k.Name))
		}
		errs.add(name, "unknown service %s: %s; the variables of this program's clients start with %s", parts[0],
			knownServices(known), strings.Join(names, ", "))
		return envLeaf{}
	}
	base := EnvPrefix + parts[0]
	method := ""
	parts = parts[1:]
	if len(parts) > 0 && parts[0] == "METHODS" {
		if len(parts) < 2 || len(p.Methods) == 0 {
			example := "<METHOD>"
			if len(p.Methods) > 0 {
				example = methodName(p.Methods[0].Name)
			}
			errs.add(name, "name the method after METHODS, as in %s", EnvName(p.Name, example, "timeout"))
			return envLeaf{}
		}
		// The method's part likewise: a method may be named Get__Stock.
		after := strings.Join(parts[1:], "__")
		var alike []string
		for i := range p.Methods {
			if m := methodName(p.Methods[i].Name); startsWith(after, strings.ToUpper(m)) {
				alike = append(alike, m)
			}
		}
		alike = plausible(alike, func(m string) bool { return spells(after, strings.ToUpper(m), false) })
		spelled := ""
		for _, m := range alike {
			method, spelled = m, strings.ToUpper(m)
		}
		if method != "" {
			parts = append([]string{"METHODS", spelled}, splitParts(after[len(spelled):])...)
		}
		if len(alike) > 1 {
			errs.add(name, "means each of the methods %s of %s, whose variables are spelled alike: override them in the file instead", strings.Join(alike, " and "), p.Name)
			return envLeaf{}
		}
		if method == "" {
			hint := ""
			if s := suggestMethod(p, parts[1]); s != "" {
				hint = didYouMean(strings.ToUpper(s))
			}
			errs.add(name, "unknown method %s of %s%s: %s", parts[1], p.Name, hint, knownMethods(p))
			return envLeaf{}
		}
		base += "__METHODS__" + parts[1]
		parts = parts[2:]
	}
	if len(parts) == 0 {
		errs.add(name, "name the field after the service or method, as in %s", EnvName(p.Name, method, "timeout"))
		return envLeaf{}
	}
	md := policyDesc
	var fd protoreflect.FieldDescriptor
	var path string
	for i, part := range parts {
		k := asciiLower(part)
		path += k
		f, problem := field(md, k, path)
		if problem != "" {
			errs.add(name, "%s", problem)
			return envLeaf{}
		}
		sub := f.Message()
		isGroup := sub != nil && sub.FullName() != "google.protobuf.Duration"
		if last := i == len(parts)-1; last == isGroup {
			if isGroup {
				errs.add(name, "%s is a group of settings: name one of its fields after it (%s)", k, fieldNames(sub))
			} else {
				errs.add(name, "%s is a value and has no fields", k)
			}
			return envLeaf{}
		}
		if isGroup {
			md, path = sub, path+"."
		}
		fd = f
	}
	v, err := convert(fd, envValue(fd, value))
	if err != nil {
		errs.add(name, "%v", err)
		return envLeaf{}
	}
	return envLeaf{p.Name, &leaf{method: method, path: path, value: v, base: base, env: true, source: name}}
}

// startsWith reports whether rest, a variable's name from a service's or
// a method's part on, starts with that part spelled as word.
func startsWith(rest, word string) bool {
	return rest == word || strings.HasPrefix(rest, word+"__")
}

// plausible keeps, of several names a variable's part may be read as,
// those read ok, or when none is, the longest (Get__Stock, not Get, for
// GET__STOCK__COOLDOWN: the field is what is misspelt): two are left only
// when the name means either.
func plausible(names []string, ok func(string) bool) []string {
	if len(names) < 2 {
		return names
	}
	var kept []string
	for _, n := range names {
		if ok(n) {
			kept = append(kept, n)
		}
	}
	if len(kept) > 0 {
		return kept
	}
	longest := 0
	for _, n := range names {
		longest = max(longest, len(n))
	}
	for _, n := range names {
		if len(n) == longest {
			kept = append(kept, n)
		}
	}
	return kept
}

// spells reports whether rest, the name of a variable from a service's
// (or, not service, a method's) part on, starts with that part spelled
// as word followed by "__" and the path of a value of the annotation (or,
// for a service, METHODS). So Get__Stock's part is not read as method
// Get's, whose field STOCK does not exist, nor a.b's TIMEOUT as a service
// a.b_.timeout with no field, nor Get__Retry's TIMEOUT as Get's
// RETRY__TIMEOUT, which names no value (retry has no timeout).
func spells(rest, word string, service bool) bool {
	next, ok := strings.CutPrefix(rest, word+"__")
	if !ok {
		return false
	}
	parts := strings.Split(next, "__")
	if service && parts[0] == "METHODS" {
		return true
	}
	md := policyDesc
	for i, part := range parts {
		f := md.Fields().ByName(protoreflect.Name(asciiLower(part)))
		if f == nil {
			return false
		}
		sub := f.Message()
		isGroup := sub != nil && sub.FullName() != "google.protobuf.Duration"
		if last := i == len(parts)-1; last == isGroup {
			return false
		}
		md = sub
	}
	return true
}

// splitParts splits what follows a service's or a method's part of a
// variable's name ("__RETRY__MAX_ATTEMPTS") into its parts; none for "".
func splitParts(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(s, "__"), "__")
}

// respell returns the proper name of the variable that name means, read
// leniently (any case, parts joined by one underscore or several, a
// method or field spelled with or without its underscores), or "" when it
// means no one value of the known services.
func respell(name string, known map[string]*policy.Service) string {
	upper := strings.ToUpper(name)
	if !strings.HasPrefix(upper, envFamily) {
		return ""
	}
	var tokens []string
	for _, t := range strings.Split(upper[len(envFamily):], "_") {
		if t != "" {
			tokens = append(tokens, t)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(known)) { // the same answer every run
		p := known[name]
		rest, ok := consume(tokens, envService(p.Name))
		if !ok {
			continue
		}
		method := ""
		if len(rest) > 0 && rest[0] == "METHODS" {
			for i := range p.Methods {
				m := methodName(p.Methods[i].Name)
				if r, ok := consume(rest[1:], strings.ToUpper(m)); ok {
					method, rest = m, r
					break
				}
			}
			if method == "" {
				continue
			}
		}
		if path := leafPath(policyDesc, rest, ""); path != "" {
			return EnvName(p.Name, method, path)
		}
	}
	return ""
}

// consume removes from tokens those that spell word, with or without the
// underscores word has; ok is false when they do not.
func consume(tokens []string, word string) (rest []string, ok bool) {
	want := strings.ReplaceAll(word, "_", "")
	got := ""
	for i, t := range tokens {
		got += t
		switch {
		case got == want:
			return tokens[i+1:], true
		case !strings.HasPrefix(want, got):
			return nil, false
		}
	}
	return nil, false
}

// leafPath returns the path of the one overridable value of md that tokens
// spell, or "".
func leafPath(md protoreflect.MessageDescriptor, tokens []string, prefix string) string {
	for i := range md.Fields().Len() {
		f := md.Fields().Get(i)
		rest, ok := consume(tokens, strings.ToUpper(string(f.Name())))
		if !ok {
			continue
		}
		path := prefix + string(f.Name())
		if _, problem := field(md, string(f.Name()), path); problem != "" {
			continue
		}
		sub := f.Message()
		if sub != nil && sub.FullName() != "google.protobuf.Duration" {
			if p := leafPath(sub, rest, path+"."); p != "" {
				return p
			}
			continue
		}
		if len(rest) == 0 {
			return path
		}
	}
	return ""
}

// asciiLower lower-cases the ASCII letters of a name's part, and only
// them: Unicode's rules read "İ" as "i" and the Kelvin sign as "k", so
// that TİMEOUT would be read as timeout, one more name for a value whose
// variable EnvName spells otherwise.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
