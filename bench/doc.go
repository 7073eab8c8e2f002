// Package bench compares the cost of the resilient runtime with the
// libraries a Go program would otherwise use: failsafe-go for the whole
// stack of policies, sony/gobreaker for the circuit breaker alone, a bare
// context.WithTimeout as the floor, and the plain generated gRPC client over
// loopback. It holds benchmarks only; BENCHMARKS.md at the repository root
// has the figures and run.sh the commands that produce them.
//
// It is a module of its own so that the libraries it measures against are
// required here and never in the root go.mod: a program that depends on
// github.com/go-resilient/resilient does not download failsafe-go or
// gobreaker, and their versions never constrain its own. The replace
// directive makes it measure the runtime in this checkout, not a release.
package bench
