#!/usr/bin/env bash
# Speculative decoding on the models at hand, over the first N Spec-Bench
# prompts: AR vs layerskip drafts with full / static / dynamic draft
# vocabularies, tree and chain. Writes build/bench/spec-<model>.md (a table)
# and the per-prompt JSON lines beside it; prints the table.
#
#   tools/bench/bench_spec.sh [N prompts (default 40)] [max new tokens (default 128)]
#
# Runs outside CI (minutes). The machine, date and commit go into the file.
set -euo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_spec.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
n=${1:-40}
max_new=${2:-128}
build=${MS_BUILD_DIR:-$root/build/release} # one build folder: what tools/demo.sh builds
out=$root/build/bench
shared=$root/../shared
mkdir -p "$out"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
T=$build/tools
sb=$shared/data/spec_bench/question.jsonl

# stories260K (real weights) and its static lists from the corpus
s260=$root/build/models/stories260k
mkdir -p "$root/build/models"
[ -f "$s260/config.json" ] || "$T/convert-llama2c" "$shared/models/stories260k/stories260K.bin" "$shared/models/stories260k/tok512.bin" "$s260"
for k in 64 128; do
  [ -f "$out/s260-static-$k.txt" ] || "$T/microspec-freqlist" --tokenizer "$s260" --k $k --out "$out/s260-static-$k.txt" \
    "$shared/corpus/tinyshakespeare.txt" "$shared/corpus/wikitext2_valid.txt" 2>/dev/null
done

# a random-weight Qwen3-shaped model with the real 151,936-row vocabulary
big=$root/build/models/random-qwen3-v151936
if [ ! -f "$big/config.json" ]; then
  "$T/microspec-mkmodel" --out "$big" --arch qwen3 --vocab 151936 --hidden 64 --layers 4 --heads 4 --kv-heads 2 \
    --head-dim 16 --ffn 128 --tie 1 --seed 11 --tokenizer "$shared/tokenizers/qwen3/tokenizer.json" >/dev/null
fi
[ -f "$out/q3-static-32768.txt" ] || "$T/microspec-freqlist" --tokenizer "$shared/tokenizers/qwen3/tokenizer.json" \
  --vocab-size 151936 --k 32768 --out "$out/q3-static-32768.txt" "$shared/corpus/python-docs.txt" \
  "$shared/corpus/wikitext2_valid.txt" "$shared/corpus/tinyshakespeare.txt" 2>/dev/null

run() { # run NAME MODEL EXTRA_FLAGS... → one table row
  local name=$1 model=$2; shift 2
  local log=$out/run.log
  "$T/microspec-generate" --model "$model" --prompts-jsonl "$sb" --first "${n_run:-$n}" -n "${new_run:-$max_new}" --quiet \
    --stats-out "$out/$tag-$name.jsonl" "$@" >"$log" 2>/dev/null
  local tps acc cov voc
  tps=$(sed -nE 's/.*tokens\/s \(mean over prompts\): ([0-9.]+).*/\1/p' "$log")
  acc=$(sed -nE 's/^mean accepted length: ([0-9.]+).*/\1/p' "$log")
  cov=$(sed -nE 's/.*coverage ([0-9.]+).*/\1/p' "$log"); cov=${cov:-—}
  voc=$(sed -nE 's/^draft vocabulary: mean ([0-9.]+), max ([0-9]+).*/\1 (max \2)/p' "$log"); voc=${voc:-—}
  echo "| $name | $acc | $cov | $voc | $tps |" | tee -a "$md"
}

header() {
  {
    echo
    echo "## $1"
    echo
    echo "$2"
    echo
    echo "| method | mean accepted length | coverage | draft vocabulary rows | tokens/s |"
    echo "|---|---|---|---|---|"
  } | tee -a "$md"
}

md=$out/spec-report.md
{
  echo "# Speculative decoding on CPU: first $n Spec-Bench prompts"
  echo
  echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); date: $(date -u +%F); commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "command: tools/bench/bench_spec.sh $n $max_new (greedy, max $max_new new tokens, single thread, tokens/s = mean over prompts of new tokens / wall time incl. prefill)"
} | tee "$md"

tag=s260
header "stories260K (real weights, V = 512), prompts encoded raw (no chat template)" \
  "Draft: the target's own first L layers (layerskip). Static lists: top-K ids of tinyshakespeare + wikitext-2 valid."
run "AR (target alone)" "$s260"
for L in 2 4; do
  for shape in tree chain; do
    sf=""; [ $shape = chain ] && sf="--chain --tree-depth 4"
    run "layerskip L=$L $shape, full" "$s260" --draft-kind layerskip --draft-layers $L --vocab full $sf
    for k in 64 128; do
      run "layerskip L=$L $shape, static K=$k" "$s260" --draft-kind layerskip --draft-layers $L --vocab static --vocab-list "$out/s260-static-$k.txt" $sf
    done
    for w in 32 64 128 256; do
      run "layerskip L=$L $shape, dynamic W_max=$w" "$s260" --draft-kind layerskip --draft-layers $L --vocab dynamic --w-max $w $sf
    done
  done
done

tag=q3
n_run=$(( n < 10 ? n : 10 )) new_run=64
header "Random-weight Qwen3-shaped model, V = 151,936, d = 64, 4 layers — RANDOM WEIGHTS: only costs mean anything" \
  "First $n_run prompts through the ChatML template, max $new_run new tokens (the full-vocabulary head is slow on CPU). Draft: the first layer (layerskip). Static list: top-32,768 ids of the corpus."
run "AR (target alone)" "$big" --chat
run "layerskip L=1 tree, full" "$big" --chat --draft-kind layerskip --draft-layers 1 --vocab full
run "layerskip L=1 tree, static K=32768" "$big" --chat --draft-kind layerskip --draft-layers 1 --vocab static --vocab-list "$out/q3-static-32768.txt"
run "layerskip L=1 tree, dynamic W_max=3072" "$big" --chat --draft-kind layerskip --draft-layers 1 --vocab dynamic --w-max 3072
echo
echo "written: $md"
