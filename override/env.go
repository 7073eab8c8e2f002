package override

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/runtime"
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
// (UNAVAILABLE,DEADLINE_EXCEEDED).
const EnvPrefix = "RESILIENT__"

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

// parseEnv reads the variables of environ that start with EnvPrefix.
func (s *Set) parseEnv(environ []string, known map[string]*runtime.ServicePolicy, errs *problems) {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		parts := strings.Split(name[len(EnvPrefix):], "__")
		var p *runtime.ServicePolicy
		for _, k := range known {
			if envService(k.Name) == parts[0] {
				p = k
			}
		}
		if p == nil {
			var names []string
			for _, k := range known {
				names = append(names, EnvPrefix+envService(k.Name))
			}
			errs.add(name, "unknown service %s: %s; the variables of this program's clients start with %s", parts[0],
				knownServices(known), strings.Join(names, ", "))
			continue
		}
		base := EnvPrefix + parts[0]
		method := ""
		parts = parts[1:]
		if len(parts) > 0 && parts[0] == "METHODS" {
			if len(parts) < 2 {
				errs.add(name, "name the method after METHODS, as in %s", EnvName(p.Name, methodName(p.Methods[0].Name), "timeout"))
				continue
			}
			for i := range p.Methods {
				if strings.ToUpper(methodName(p.Methods[i].Name)) == parts[1] {
					method = methodName(p.Methods[i].Name)
				}
			}
			if method == "" {
				errs.add(name, "unknown method %s of %s: %s", parts[1], p.Name, knownMethods(p))
				continue
			}
			base += "__METHODS__" + parts[1]
			parts = parts[2:]
		}
		if len(parts) == 0 {
			errs.add(name, "name the field after the service or method, as in %s", EnvName(p.Name, method, "timeout"))
			continue
		}
		md := policyDesc
		var fd protoreflect.FieldDescriptor
		var path string
		bad := false
		for i, part := range parts {
			k := strings.ToLower(part)
			path += k
			f, problem := field(md, k, path)
			if problem != "" {
				errs.add(name, "%s", problem)
				bad = true
				break
			}
			sub := f.Message()
			isGroup := sub != nil && sub.FullName() != "google.protobuf.Duration"
			if last := i == len(parts)-1; last == isGroup {
				if isGroup {
					errs.add(name, "%s is a group of settings: name one of its fields after it (%s)", k, fieldNames(sub))
				} else {
					errs.add(name, "%s is a value and has no fields", k)
				}
				bad = true
				break
			}
			if isGroup {
				md, path = sub, path+"."
			}
			fd = f
		}
		if bad {
			continue
		}
		v, err := convert(fd, value, true)
		if err != nil {
			errs.add(name, "%v", err)
			continue
		}
		s.target(p.Name, known).set(&leaf{method: method, path: path, value: v, base: base, env: true, source: name})
	}
}
