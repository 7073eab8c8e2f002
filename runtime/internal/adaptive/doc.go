// Package adaptive is an adaptive concurrency limit for the calls towards
// one dependency: the number of calls it lets be in flight at once follows
// the dependency's latency, so that when the dependency slows the limit
// falls within a few round trips and the calls above it are refused locally
// at once, instead of each holding a goroutine until its timeout.
//
// # Algorithm
//
// A gradient on latency, with multiplicative decrease on drops (the scheme
// of TCP congestion control, as Netflix's concurrency-limits, Envoy's
// adaptive concurrency filter and failsafe-go's adaptive limiter apply it
// to requests), counted in rounds:
//
//   - A round lasts one round trip: it ends when a call admitted after the
//     round began comes back. Each Token carries the round of its Acquire,
//     so no clock is needed to tell when a round trip has passed, and the
//     limit moves at most once per round whatever the call rate. When the
//     limit has just fallen, the calls of the round before may fill it for
//     one more round trip before a call of the new round is admitted: a
//     round then lasts two.
//   - At the end of a round its RTT is the median RTT of the successes the
//     round saw (of its first 32 of each class): a tail of slow answers
//     (a cache miss, a pause) that a minority of calls meet does not move
//     it, where a queue, which every call waits in, does
//     (TestAttack27ILatencyTailWithoutQueueingHoldsTheLimitLow: 10 ms, one
//     answer in five 40 ms, held the limit at a mean of 10 of 16 with the
//     mean, 15 with the median). The baseline is the dependency's latency
//     without queueing over the last BaselineWindow, in ten buckets: the
//     smallest of the anchor (the window's first round, or the round a
//     restart, below, starts from) and of the 10th percentile of each
//     bucket's round RTTs: the current bucket's once it holds 16 rounds,
//     a past bucket's whatever it holds, its median below 16 (a histogram
//     of 64 bins of 1/16 octave, two octaves either side of the baseline
//     the bucket began under, counts of 32 bits: read to within 6 %, never
//     above); without either, the smallest round RTT of the window. Not the smallest round RTT alone: rounds of a few answers,
//     with a latency spread wide, scatter, and the smallest of 30 s is a
//     lucky one (TestAttack29cLogNormalLatencyWithoutQueueing: log-normal
//     20 ms, σ 0.5, no queue, the limit at 6 of 16 with it, 14.9 with the
//     percentile). The anchor counts while the window holds rounds (its
//     first round while its bucket is in the window, that bucket's
//     reading after it, so that a lucky first round does not hold the
//     limit down for good), so a queue does not move the baseline however
//     long it lasts; only the not-queueing rule's restart, or a window
//     left empty, sets another.
//     A round's successes counted before a spell of none longer than the
//     window are dropped from it (the last answers of a burst that
//     queued would otherwise be the next burst's anchor).
//     Each class of success (ReleaseAs: the runtime gives each method
//     sharing the limit two, its answers and its error answers) has its own
//     baseline, and a round with several is judged by the mean over its
//     successes of how many times its class's baseline each took: a round
//     of a fast method's answers, or of errors that cost the dependency
//     nothing, does not set the latency a slow method's answers are taken
//     for queueing against (TestAttack24gFastAndSlowMethodsSharingTheLimit:
//     1 ms and 100 ms methods of a dependency that never queued had the
//     limit at 1 and 29580 calls refused for 446 let through, before).
//   - Within Tolerance × baseline the dependency is not queueing: the limit
//     grows by √limit (fast from a low limit, gently near a high one), but
//     only when the round used at least half the limit, so that an idle
//     client's limit does not creep to the maximum. Beyond it, the limit
//     shrinks in proportion, to limit × Tolerance × baseline / RTT, but by
//     no more than half. Either change is applied by the share Smoothing.
//   - Not queueing: a queue's wait shortens with the calls ahead in it, a
//     dependency whose own latency moved stays as slow with fewer. A run
//     of rounds beyond the tolerance keeps a reference round: its mean of
//     the calls in flight its successes were admitted with (Token carries
//     it) and its gradient, the gradient taken from the latest round at
//     more than three quarters of that load (a queue that still builds
//     grows slower round by round) and rescaled when a baseline moves.
//     Two rounds of the run in a row admitted with at most three quarters
//     of the reference's load (or at MinLimit), neither 15 % faster,
//     restart every baseline from the second and count as within the
//     tolerance (two, so that one round straddling a change of capacity
//     does not); one that is faster becomes the reference. A round within
//     the tolerance, or a drop, ends the run.
//     (TestSlowWithoutQueueingIsTheNewBaseline: 40 ms to 4 s without a
//     queue, the limit dips to about 15 of 37 and is back within 80 s of
//     4 s rounds; TestQueueWithoutTimeoutsShrinksByLatency: a queue still
//     takes it from 37 to about 6.)
//   - A drop (a timeout, an overload refusal) halves the limit at once,
//     unsmoothed; drops of calls admitted before the last halving do not
//     halve it again, so it halves once per round trip, as TCP does on a
//     lost window, and not once per call of a burst that timed out
//     together.
//   - The limit stays within [MinLimit, MaxLimit]; Acquire admits while the
//     calls in flight are fewer than its integer part.
//
// The cascade this is for: a dependency whose latency steps from 40 ms to
// 4 s, its calls timing out at 300 ms. Every call in flight times out; the
// first drop halves the limit, and each following timeout halves it again,
// so a limit of L is at 1 after ⌈log₂ L⌉ timeouts, one more for the calls
// admitted just before the step: the initial 20 is at 1 after 5 round trips
// of 300 ms, 1.5 s. Meanwhile, and until the dependency recovers, it sees
// one call per timeout, and the rest of the demand is refused locally at
// once. When the latency comes back to 40 ms, the probe in flight returns
// (at most one timeout later) and each round of 40 ms grows the limit by
// Smoothing × √limit: from 1 back to 20 in about 14 rounds. TestCascade
// plays it with 60 callers against a dependency that serves 25 at once: the
// limit settles about 37 while healthy, falls to 1 in 1.56 s of timeouts,
// and is back at 20 0.86 s after the recovery.
//
// # Parameters and defaults
//
//   - MinLimit 1: during an outage one call at a time probes the dependency.
//   - MaxLimit 100, InitialLimit 20 (Netflix's and failsafe-go's initial
//     limit). Under a static bulkhead, Policy.WithCeiling caps both by its
//     permits.
//   - Tolerance 1.5: a round 50 % slower than the baseline starts shrinking
//     the limit; the limit settles where the dependency's queue adds about
//     half its unloaded latency. 1.5 is Netflix Gradient2's default; Envoy's
//     buffer of 25 % is tighter and reacts to noise.
//   - Smoothing 0.5: half of each latency-driven change is applied per
//     round, so a single noisy round cannot halve the limit, and two
//     consistent ones go most of the way.
//   - BaselineWindow 30 s: the baseline forgets a latency that no longer
//     occurs within 30 s, so a dependency that became slower for good (a new
//     release, a farther replica) is accepted as it is after 30 s at the
//     latest (sooner when the not-queueing rule sees it), while a slowdown
//     shorter than that that follows the load is judged against the latency
//     before it.
//
// # Composition
//
// The limit sits inside the static bulkhead: the bulkhead's permits are the
// ceiling (Policy.WithCeiling), the bulkhead bounds the goroutines that may
// wait, and the adaptive limit refuses, without waiting, the calls above
// what the dependency currently serves in time. It judges attempts, not
// calls: in the runtime's layer order it goes inside the retry loop, after
// the client-side throttler and before the circuit breaker, so that an
// attempt it refuses takes no breaker probe, and every attempt it admits is
// Released with how it ended: Success for an answer (including an error
// that is an answer), Dropped for a timeout or an overload refusal
// (RESOURCE_EXHAUSTED, UNAVAILABLE), Ignored for the caller's cancellation
// or a refusal by a later local layer. Its refusals are local, not failures
// of the dependency: they are never recorded by the breaker, and they end
// the retry loop without spending the retry budget. The breaker remains the
// last resort for a dependency that fails fast rather than slowly, which
// this limit, fed by latency and drops, does not see as overloaded.
package adaptive
