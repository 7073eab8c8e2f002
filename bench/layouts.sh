#!/usr/bin/env bash
# layouts.sh compares the benchmarks of two revisions of the repository
# across several code layouts. A few nanoseconds of the stack's figures
# depend on where the linker puts the code, not on the code: a build with
# one unused function added moves StackFloor's over-context by up to 10 ns.
# So each revision is built LAYOUTS times, each time with another number
# (0, 1, 2, …) of unused padding functions added to package runtime, the
# builds run in turns COUNT times, and benchstat compares the pooled
# samples of each revision (n = LAYOUTS × COUNT).
#
#   bench/layouts.sh main               # main against the working tree
#   BENCH='StackParts' COUNT=6 LAYOUTS=5 bench/layouts.sh 3e20d8c HEAD
#
# The bench/ directory of the working tree is used for both, so that both
# run the same benchmarks; only the module's own packages come from each
# revision ("." for the working tree, uncommitted changes included).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
old=${1:?usage: layouts.sh OLD [NEW]}; new=${2:-.}
dir=$(mktemp -d "${TMPDIR:-/tmp}/layouts.XXXXXX")
checkout() { # rev dest
  mkdir -p "$2"
  if [ "$1" = . ]; then
    tar -c --exclude=.git . | tar -x -C "$2"
  else
    git archive "$1" | tar -x -C "$2"
  fi
  rm -rf "$2/bench" && cp -r bench "$2/bench"
}
layouts=${LAYOUTS:-5}
for side in old new; do
  rev=$old; [ $side = new ] && rev=$new
  checkout "$rev" "$dir/$side"
  for k in $(seq 0 $((layouts - 1))); do
    pad=$dir/$side/runtime/zz_layout_pad.go
    { echo 'package runtime'; for i in $(seq 1 $k); do
      printf '\n// ZZPad%d moves the code that follows it.\nfunc ZZPad%d(n int) int {\n\ts := 0\n\tfor i := range n {\n\t\ts += i * i\n\t}\n\treturn s\n}\n' "$i" "$i"
    done; } > "$pad"
    (cd "$dir/$side/bench" && go test -c -o "$dir/$side-$k.test" .)
  done
done
: > "$dir/old.txt"; : > "$dir/new.txt"
for _ in $(seq "${COUNT:-6}"); do
  for k in $(seq 0 $((layouts - 1))); do
    for side in old new; do
      "$dir/$side-$k.test" -test.run '^$' -test.bench "${BENCH:-StackFloor|StackParts}" -test.benchmem \
        -test.benchtime "${BENCHTIME:-500ms}" >> "$dir/$side.txt"
    done
  done
done
cd bench && go tool -modfile=../tools/go.mod benchstat old="$dir/old.txt" new="$dir/new.txt"
printf '\nraw results: %s/old.txt %s/new.txt\n' "$dir" "$dir"
