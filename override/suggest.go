package override

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/runtime/policy"
)

// suggestField returns the field of md that k most likely misspells: its
// JSON name (maxAttempts), its name in another case or without its
// underscores (cooldown), or a name at most two edits away (timout); ""
// when none is close.
func suggestField(md protoreflect.MessageDescriptor, k string) string {
	names := make([]string, md.Fields().Len())
	for i := range names {
		f := md.Fields().Get(i)
		if f.JSONName() == k {
			return string(f.Name())
		}
		names[i] = string(f.Name())
	}
	return closest(names, k)
}

// suggestMethod returns the method of p that m most likely misspells
// (getStock, GetStok), by its short name; "" when none is close.
func suggestMethod(p *policy.Service, m string) string {
	names := make([]string, len(p.Methods))
	for i := range p.Methods {
		names[i] = methodName(p.Methods[i].Name)
	}
	return closest(names, m)
}

// closest returns the name k most likely misspells: one equal to it in
// another case or without underscores, else the nearest at most two edits
// away and less than half its length; "" when none is close.
func closest(names []string, k string) string {
	flat := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	best, bestDist := "", 3
	for _, name := range names {
		if flat(name) == flat(k) {
			return name
		}
		if d := editDistance(flat(name), flat(k)); d < bestDist && d < len(name)/2 {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
