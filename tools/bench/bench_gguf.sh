#!/usr/bin/env bash
# Decode speed on the real GGUF models: this engine (exact f32 matmuls and the
# 8-bit --q8-matmul path) beside llama.cpp's llama-bench on the same file and
# thread count, runs alternating, with the read-bandwidth floor.
#
#   tools/bench/bench_gguf.sh [--models "NAME ..."] [--threads "1 2"] [--reps N] [--tokens N] [--bandwidth GBPS] [--out FILE]
#
# Per (model, threads), N rounds of: llama-bench -p 0 -n TOKENS -r 1 (token
# generation only), microspec-generate f32, microspec-generate q8 (a 16-token
# prompt, TOKENS new with --ignore-eos; its "decode" figure excludes the
# prefill, like llama-bench's tg). The median of the rounds is reported.
# Floor: bytes of weights read per token (every tensor but the input
# embedding, which a step reads one row of — unless it is also the tied head)
# over the read bandwidth (default 46 GB/s: two threads, AVX-512 loads over
# 1 GiB on this project's machines), as tokens/s.
# Defaults: every installed model, threads "1 2", 3 reps, 128 tokens; a
# Markdown table to stdout (and to --out FILE). Needs tools/build-llamacpp.sh.
# Environment: MS_BUILD_DIR (default build/release).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${MS_BUILD_DIR:-$root/build/release}
models="gemma3-270m qwen2.5-coder-0.5b qwen2.5-coder-1.5b" threads="1 2" reps=3 tokens=128 bw=46 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --bandwidth) bw=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_gguf: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
gen="$build/tools/microspec-generate"
[ -x "$gen" ] || { echo "bench_gguf: $gen missing: build first" >&2; exit 2; }
lbin=$(bash "$root/tools/build-llamacpp.sh" --bin)
[ -x "$lbin/llama-bench" ] || { echo "bench_gguf: llama-bench missing: run tools/build-llamacpp.sh" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt="def quicksort(arr):
    \"\"\"Sort a list of numbers in ascending order.\"\"\""

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

{
  echo "| model | threads | llama.cpp tg tok/s | f32 tok/s | q8 tok/s | q8 / llama.cpp | floor tok/s (${bw} GB/s) | MB read per token |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$tmp/table.md"
for m in $models; do
  file=$(bash "$root/tools/install-models.sh" --path "$m")
  [ -f "$file" ] || { echo "bench_gguf: $m not installed (tools/install-models.sh $m); skipped" >&2; continue; }
  read -r mb floor < <(python3 - "$file" "$bw" <<'PY'
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
names = {t.name for t in r.tensors}
tied = "output.weight" not in names
b = sum(int(t.n_bytes) for t in r.tensors if t.name != "token_embd.weight" or tied)
print("%.1f %.1f" % (b / 1e6, float(sys.argv[2]) * 1e9 / b))
PY
)
  for t in $threads; do
    : >"$tmp/l" ; : >"$tmp/f" ; : >"$tmp/q"
    for ((r = 1; r <= reps; r++)); do
      echo "bench_gguf: $m, $t threads, round $r/$reps" >&2
      "$lbin/llama-bench" -m "$file" -t "$t" -p 0 -n "$tokens" -r 1 -o jsonl 2>/dev/null |
        python3 -c 'import json,sys; [print(json.loads(l)["avg_ts"]) for l in sys.stdin if l.strip()]' >>"$tmp/l" || true
      for mode in f q; do
        extra=(--f32-matmul)
        [ $mode = q ] && extra=(--q8-matmul)
        "$gen" --model "$file" --prompt "$prompt" -n "$tokens" --ignore-eos --threads "$t" "${extra[@]}" \
          >/dev/null 2>"$tmp/err" || { tail -3 "$tmp/err" >&2; continue; }
        grep -o 'decode: [0-9.]* tok/s' "$tmp/err" | awk '{print $2}' >>"$tmp/$mode"
      done
    done
    lt=$(median <"$tmp/l") ft=$(median <"$tmp/f") qt=$(median <"$tmp/q")
    ratio=$(awk -v a="$qt" -v b="$lt" 'BEGIN {printf (b > 0 ? "%.2fx" : "n/a"), a / b}')
    echo "| $m | $t | $lt | $ft | $qt | $ratio | $floor | $mb |" >>"$tmp/table.md"
  done
done
cat "$tmp/table.md"
[ -z "$out" ] || cp "$tmp/table.md" "$out"
