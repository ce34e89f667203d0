#!/usr/bin/env bash
# Speculative == autoregressive, greedy, token for token, on the real GGUF
# models in every draft vocabulary mode (full, static FR-Spec list, dynamic
# MicroSpec window), tree and chain, and under the draft policies (the
# confidence stop --draft-p-min, adaptive depth --draft-adaptive), and issue
# 16's per-step modes: specvocab, specvocab+window (the artefact built here by
# tools/specvocab_build.py for the model whose head drafts), dynaspec and
# dynaspec+window (a small artefact made here: tools/dynaspec_cluster.py,
# microspec-record on ../shared/corpus, tools/dynaspec_train.py) and the static
# list under the position-aware budget.
#
#   test_gguf_spec.sh BUILD_DIR gemma|qwen [N_PROMPTS] [N_TOKENS]
#
# gemma: Gemma 3 270M target, layer-skip draft (its first 12 layers).
# qwen:  Qwen2.5-Coder 1.5B target, the 0.5B as an independent `lm` draft.
# Prompts: the first N of tests/golden/gguf/greedy_prompts.json (code and
# prose). The static list is built from ../shared/corpus with the model's own
# tokenizer (microspec-freqlist, 32,768 ids) when ../shared is there, else from
# the prompts themselves. Exit 77 when a model cannot be installed.
set -euo pipefail
build=$1 which=$2 n=${3:-2} tokens=${4:-24}
src=$(cd "$(dirname "$0")/.." && pwd)
case $which in
  gemma) target=gemma3-270m; draft_args=(--draft-kind layerskip --draft-layers 12); head_model=$target ;;
  qwen) target=qwen2.5-coder-1.5b; draft_args=(--draft-kind lm --draft @qwen2.5-coder-0.5b); head_model=qwen2.5-coder-0.5b ;;
  *) echo "usage: test_gguf_spec.sh BUILD_DIR gemma|qwen [N_PROMPTS] [N_TOKENS]" >&2; exit 2 ;;
esac
models=("$target")
[ "$which" = qwen ] && models+=(qwen2.5-coder-0.5b)
for m in "${models[@]}"; do
  bash "$src/tools/install-models.sh" "$m" >&2 || { echo "SKIP: $m cannot be installed"; exit 77; }
done
file=$(bash "$src/tools/install-models.sh" --path "$target")
for i in "${!draft_args[@]}"; do
  case ${draft_args[$i]} in @*) draft_args[$i]=$(bash "$src/tools/install-models.sh" --path "${draft_args[$i]#@}") ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$src/tests/golden/gguf/greedy_prompts.json" "$n" >"$tmp/prompts.jsonl" <<'PY'
import json, sys
for i, t in enumerate(json.load(open(sys.argv[1]))[: int(sys.argv[2])]):
    print(json.dumps({"question_id": i, "category": "spec", "turns": [t]}))
PY
corpus=("$src/../shared/corpus/"*.txt)
if [ ! -f "${corpus[0]}" ]; then
  python3 -c 'import json,sys; [print(json.loads(l)["turns"][0]) for l in open(sys.argv[1])]' "$tmp/prompts.jsonl" \
    >"$tmp/corpus.txt"
  corpus=("$tmp/corpus.txt")
fi
"$build/tools/microspec-freqlist" --tokenizer "$file" --k 32768 --out "$tmp/static.list" "${corpus[@]}" 2>/dev/null
python3 "$src/tools/specvocab_build.py" --model "$(bash "$src/tools/install-models.sh" --path "$head_model")" \
  --out "$tmp/specvocab.gguf" 2>"$tmp/specvocab.err" || { tail -5 "$tmp/specvocab.err" >&2; exit 1; }
# DynaSpec: a small artefact for the head model (clusters, recorded states,
# router): quality does not matter here, only that any pick stays lossless.
head_file=$(bash "$src/tools/install-models.sh" --path "$head_model")
{ python3 "$src/tools/dynaspec_cluster.py" --model "$head_file" --out "$tmp/clusters.npz" --clusters 256 --iters 4 &&
  "$build/tools/microspec-record" --model "$head_file" --out "$tmp/states.rec" --max-positions 2048 --window 256 \
    "${corpus[@]}" &&
  python3 "$src/tools/dynaspec_train.py" --model "$head_file" --clusters "$tmp/clusters.npz" --records "$tmp/states.rec" \
    --out "$tmp/dynaspec.gguf" --epochs 2; } 2>"$tmp/dynaspec.err" || { tail -5 "$tmp/dynaspec.err" >&2; exit 1; }

gen() { # NAME ARGS... → $tmp/NAME.jsonl
  local name=$1
  shift
  "$build/tools/microspec-generate" --model "$file" --prompts-jsonl "$tmp/prompts.jsonl" -n "$tokens" --quiet \
    --ids-out "$tmp/$name.jsonl" "$@" >/dev/null 2>"$tmp/$name.err" || { tail -20 "$tmp/$name.err" >&2; return 1; }
}
gen ar
fail=0
configs=(
  "dynamic-tree|--vocab dynamic --w-max 3072 --tree-k 4 --tree-depth 3 --tree-total 16"
  "dynamic-chain|--vocab dynamic --w-max 1024 --chain --tree-depth 4"
  "static-chain|--vocab static --vocab-list $tmp/static.list --chain --tree-depth 3"
  "full-tree|--vocab full --tree-k 3 --tree-depth 2 --tree-total 8"
  "dynamic-chain-pmin|--vocab dynamic --w-max 3072 --chain --tree-depth 4 --draft-p-min 0.5"
  "dynamic-chain-adaptive|--vocab dynamic --w-max 3072 --chain --tree-depth 6 --draft-adaptive --draft-p-min 0.3"
  "specvocab-tree|--vocab specvocab --vocab-artifact $tmp/specvocab.gguf --tree-k 4 --tree-depth 3 --tree-total 16"
  "specvocab-window-chain|--vocab specvocab+window --vocab-artifact $tmp/specvocab.gguf --specvocab-k 512 --vocab-budget-decay 0.7 --vocab-budget-min 128 --chain --tree-depth 4"
  "dynaspec-tree|--vocab dynaspec --vocab-artifact $tmp/dynaspec.gguf --tree-k 4 --tree-depth 3 --tree-total 16"
  "dynaspec-window-chain|--vocab dynaspec+window --vocab-artifact $tmp/dynaspec.gguf --dynaspec-clusters 8 --dynaspec-decay 0.5 --dynaspec-min 2 --chain --tree-depth 4"
  "static-decay-tree|--vocab static --vocab-list $tmp/static.list --vocab-budget-decay 0.5 --vocab-budget-min 1024 --tree-k 4 --tree-depth 3 --tree-total 16"
)
for c in "${configs[@]}"; do
  name=${c%%|*}
  read -r -a args <<<"${c#*|}"
  gen "$name" "${draft_args[@]}" "${args[@]}" || { fail=1; continue; }
  acc=$(grep -o 'accepted [0-9.]*' "$tmp/$name.err" | tail -1 || true)
  if cmp -s "$tmp/ar.jsonl" "$tmp/$name.jsonl"; then
    echo "$which $name: == AR on $n prompts x $tokens tokens ($acc)"
  else
    echo "FAIL $which $name: output differs from AR"
    diff "$tmp/ar.jsonl" "$tmp/$name.jsonl" | head -6
    fail=1
  fi
done
exit $fail
