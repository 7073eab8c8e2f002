#!/usr/bin/env bash
# run.sh runs the comparative benchmarks and prints the benchstat tables of
# BENCHMARKS.md. The raw results go to $OUT (default: a new temporary file,
# named at the end). COUNT (default 10) is the number of runs of each
# benchmark, benchstat wants at least 6 for a confidence interval;
# BENCHTIME (default 500ms) is go test's -benchtime of each run.
#
# The test binary is built once and run COUNT times over every benchmark,
# so that each run of one implementation sits in time next to a run of the
# others: on a shared machine whose load drifts, that keeps the drift out of
# the comparison (go test -count would run the ten samples of one
# sub-benchmark back to back).
#
#   bench/run.sh                # the full run, about 6 minutes on 2 cores
#   COUNT=6 bench/run.sh
#   bench/run.sh old.txt        # only the tables, from earlier results
set -euo pipefail
cd "$(dirname "$0")"
export GOTOOLCHAIN=local

bs() { go tool -modfile=../tools/go.mod benchstat "$@"; }

if [ $# -gt 0 ]; then
  out=$1
else
  out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/resilient-bench.XXXXXX.txt")}
  bin=$(mktemp -d)/bench.test
  go test -c -o "$bin" .
  : > "$out"
  for _ in $(seq "${COUNT:-10}"); do
    "$bin" -test.run '^$' -test.bench . -test.benchmem -test.benchtime "${BENCHTIME:-500ms}" >> "$out"
  done
fi

table() { printf '\n### %s\n\n' "$1"; shift; bs "$@" "$out"; }

table "1. Full stack around a no-op call" -filter .name:Stack -col /impl
table "1. Full stack, quickest tenth of interleaved batches" -filter .name:StackFloor
table "1. The stack one layer at a time, quickest tenth of interleaved batches" -filter .name:StackParts
table "2. Circuit breaker alone, serial" -filter .name:BreakerSerial -col /impl
table "2. Circuit breaker alone, shared by N goroutines" -filter .name:Breaker -col /impl
table "2. Reference: the clock, and the breaker without it" -filter '.name:(TimeNow OR BreakerFixedTime)'
table "3. Unary call over loopback gRPC" -filter .name:GRPC -col /impl
table "4. A unary call: floor, and the caller's deadline" -filter .name:Unary -col /caller
table "5. The adaptive layers on the happy path" -filter .name:Layers -col /layer

printf '\nraw results: %s\n' "$out"
