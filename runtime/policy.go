package runtime

import (
	"time"

	"github.com/go-resilient/resilient/runtime/policy"
)

// SupportPackageIsVersion1 is referenced by generated code so that a file
// generated for a runtime this package no longer supports fails to compile
// with a message that names the mismatch. It is never removed; a new version
// is added beside it.
const SupportPackageIsVersion1 = true

// callLimit is the limit of a call that runs on its own: a stream, or the
// shared call of a cache. It is OverallTimeout, else Timeout; 0 for none.
func callLimit(m *policy.Method) time.Duration {
	if m.OverallTimeout > 0 {
		return m.OverallTimeout
	}
	return m.Timeout
}
