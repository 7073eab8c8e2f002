package override

import (
	"strings"

	"github.com/go-resilient/resilient/internal/contract"
	"github.com/go-resilient/resilient/runtime/policy"
)

// optionWords returns the message of a problem of the runtime's check
// (policy.Service.Problems) in the options' names. The check speaks to a
// Go author, and its mend names the policy's Go fields ("shorten Timeout
// below OverallTimeout"); the loader reports it to an operator, who writes
// the options ("timeout", "overall_timeout"), as the plugin and the lint
// plugin speak. Only the mend, after the problem's core (which is in the
// options' names at every boundary), is renamed, and in it only the
// fields the problem relates (its Key and With), whole words.
func optionWords(pr policy.Problem) string {
	i := strings.Index(pr.Message, pr.Core)
	if pr.Core == "" || i < 0 {
		return pr.Message
	}
	head, mend := pr.Message[:i+len(pr.Core)], pr.Message[i+len(pr.Core):]
	names := map[string]string{}
	for _, key := range append([]string{pr.Key}, pr.With...) {
		leaf := key[strings.LastIndexByte(key, '.')+1:]
		names[contract.GoName(leaf)] = key
	}
	var b strings.Builder
	for mend != "" {
		n := strings.IndexFunc(mend, func(r rune) bool { return !isWordRune(r) })
		if n < 0 {
			n = len(mend)
		}
		if n == 0 {
			b.WriteString(mend[:1])
			mend = mend[1:]
			continue
		}
		word := mend[:n]
		if option, ok := names[word]; ok {
			word = option
		}
		b.WriteString(word)
		mend = mend[n:]
	}
	return head + b.String()
}

func isWordRune(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}
