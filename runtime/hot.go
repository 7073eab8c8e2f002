package runtime

import "github.com/go-resilient/resilient/runtime/policy"

// hotPath holds what a call's hot path asks of its method's policy and
// layers, derived once when the client is built rather than on every call
// or attempt: the answers are fixed for the method's life.
type hotPath struct {
	// counted: the breaker or the metrics count each attempt.
	counted bool
	// guarded: an adaptive layer (the throttler, the concurrency limit)
	// admits each attempt.
	guarded bool
	// timed: an attempt with a timeout keeps the clock reading its context
	// was made at (its start), for the breaker, the metrics or the budget.
	timed bool
	// retries: the method's retry policy allows more than one attempt
	// (whether a call is retried depends on its key too).
	retries bool
	// countsEarly: a success may be counted by the breaker at the
	// attempt's start instead of its end (see settle): a breaker, no
	// metrics, no slow-call threshold, and an attempt timeout no longer
	// than one bucket of the breaker's window.
	countsEarly bool
	// measures: an attempt's duration is used (measuresDuration).
	measures bool
	// prioritized: the method has a priority that may need sending
	// (prioritize).
	prioritized bool
}

// deriveHot returns the hot path's facts of m, once its layers are bound.
func deriveHot(m *methodState) hotPath {
	p := m.policy
	h := hotPath{
		counted:     m.breaker != nil || m.metrics != nil,
		guarded:     m.throttle != nil || m.concurrency != nil,
		retries:     p.Retry != nil && p.Retry.MaxAttempts > 1,
		prioritized: p.Priority != policy.PriorityUnspecified && p.Priority <= policy.PriorityCritical,
	}
	h.timed = h.counted || m.budget != nil
	h.measures = m.measuresDuration()
	if br := m.breaker; br != nil {
		h.countsEarly = m.metrics == nil && br.p.SlowCallThreshold <= 0 && p.Timeout <= br.outcomes.BucketWidth()
	}
	return h
}
