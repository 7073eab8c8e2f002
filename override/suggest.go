package override

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// suggestField returns the field of md that k most likely misspells: its
// JSON name (maxAttempts), its name in another case or without its
// underscores (cooldown), or a name at most two edits away (timout); ""
// when none is close.
func suggestField(md protoreflect.MessageDescriptor, k string) string {
	flat := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	best, bestDist := "", 3
	for i := range md.Fields().Len() {
		f := md.Fields().Get(i)
		name := string(f.Name())
		if f.JSONName() == k || flat(name) == flat(k) {
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
