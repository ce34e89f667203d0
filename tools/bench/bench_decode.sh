#!/usr/bin/env bash
# Decode speed of stories260K, single-threaded greedy, as llama2.c's run.c is
# usually measured (BOS + "Once upon a time", 256 positions). Prints each run
# and the median; writes results to build/bench/decode.csv.
#   tools/bench/bench_decode.sh [runs]   (default 15)
# With LLAMA2C_RUN=/path/to/run (llama2.c's run.c built with gcc -O3, taking
# CHECKPOINT TOKENIZER PROMPT; not part of this project), each run of ours is
# followed by one of the baseline on the same machine, and both medians print.
set -euo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_decode.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-15}
build=${MS_BUILD_DIR:-$root/build/release} # one build folder: what tools/demo.sh builds
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
shared=$root/../shared/models/stories260k
model=$root/build/models/stories260k
mkdir -p "$(dirname "$model")"
[ -f "$model/config.json" ] || "$build/tools/convert-llama2c" "$shared/stories260K.bin" "$shared/tok512.bin" "$model"
mkdir -p "$root/build/bench"
csv=$root/build/bench/decode.csv
echo "run,prompt_tokens,generated,decode_tok_s,baseline_tok_s" >"$csv"
for i in $(seq 1 "$runs"); do
  line=$(OPENBLAS_NUM_THREADS=1 "$build/tools/microspec-generate" --model "$model" --prompt "Once upon a time" \
         --steps 256 --threads 1 2>&1 >/dev/null | grep 'decode:')
  tps=$(sed -E 's/.*decode: ([0-9.]+) tok\/s.*/\1/' <<<"$line")
  gen=$(sed -E 's/.*generated: ([0-9]+).*/\1/' <<<"$line")
  pt=$(sed -E 's/.*prompt tokens: ([0-9]+).*/\1/' <<<"$line")
  base=""
  if [ -n "${LLAMA2C_RUN:-}" ]; then
    base=$("$LLAMA2C_RUN" "$shared/stories260K.bin" "$shared/tok512.bin" "Once upon a time" 2>&1 >/dev/null \
           | sed -nE 's/achieved tok\/s: ([0-9.]+).*/\1/p')
  fi
  echo "$i,$pt,$gen,$tps,$base" >>"$csv"
  echo "run $i: $tps tok/s ($gen tokens)${base:+; llama2.c run.c: $base tok/s}"
done
median=$(tail -n +2 "$csv" | cut -d, -f4 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "stories260K single-thread greedy decode: median $median tok/s over $runs runs ($(uname -m), $(nproc) cores); $csv"
if [ -n "${LLAMA2C_RUN:-}" ]; then
  bmed=$(tail -n +2 "$csv" | cut -d, -f5 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "llama2.c run.c (gcc -O3) same runs: median $bmed tok/s"
fi
