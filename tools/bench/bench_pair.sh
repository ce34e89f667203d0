#!/usr/bin/env bash
# bench_pair.sh — the speculation claim on a CPU, beside llama.cpp on the same
# files and prompts: Qwen2.5-Coder 1.5B (target) with the 0.5B (draft),
# HumanEval tasks as ChatML chats, greedy, a fixed number of new tokens
# (--ignore-eos everywhere, so every engine decodes exactly as many).
#
#   tools/bench/bench_pair.sh [--prompts N] [--tokens N] [--threads N] [--out FILE]
#                       [--llama-draft "3 5 8"] [--llama-spec "TYPE[:K] ..."]
#                       [--configs FILE] [--llama-extra ARGS]
#
# Per prompt, in this order (so every engine sees the same machine state,
# alternating prompt by prompt):
#   llama.cpp AR    llama-bench -p 0 -n TOKENS -t THREADS (token generation
#                   from an empty context: on this VM `-d` crashes llama-bench
#                   unless weight repacking is off, which costs it ~20%; a
#                   context of ~150 tokens changes a 1.5B's decode by < 2%)
#   llama.cpp spec  llama-speculative-simple -m T -md D --spec-type draft-simple
#                   --spec-draft-n-max K --temp 0 --top-k 1 --ignore-eos
#                   LLAMA_EXTRA, for each K of --llama-draft; LLAMA_EXTRA
#                   (--llama-extra) defaults to nothing: llama.cpp at its
#                   defaults, weight repacking on (on a VM where repacking
#                   crashes, pass --llama-extra --no-repack and say so)
#                   and for each TYPE[:K] of --llama-spec (e.g. ngram-mod,
#                   ngram-map-k, draft-simple,ngram-mod:3): --spec-type TYPE
#                   (--spec-draft-n-max K where given; -md D only where TYPE
#                   has a draft-* type), its row named llama-TYPE[-K]
#   this engine     microspec-generate, one run per configuration line
#                   ("NAME|flags"; default list below), the same chat text
# Speeds are decode speeds (prefill excluded) as each engine reports them:
# llama-bench's tg, llama-speculative-simple's "decoded ... speed", this
# engine's "after prefill" (speculative) or "decode" (AR) figure. Greedy
# output of every speculative configuration of this engine is compared with
# its AR configuration of the same matmul path (a difference is reported as
# a FAILURE of losslessness, and the exit status is 1). llama.cpp's generated
# text (llama-speculative-simple's stdout after the prompt) is compared with
# this engine's first AR line's, prompt by prompt, and reported (both are
# greedy on the same file; their arithmetic differs, so they may part where
# two logits nearly tie): the same bytes reach both engines (the chat file is
# written byte for byte, its final newline included).
#
# Writes a markdown table (per prompt and the mean) to --out (default
# results/gguf/pair-DATE.md) with the command, machine and commit; the raw
# logs go to build/bench-logs/NAME.logs/ (out of git: results/ keeps reports).
# Progress on stderr.
# Environment: MS_BUILD_DIR (default build/release), LLAMA_BIN (default the
# tools/build-llamacpp.sh build), MS_SHARED_DIR (default ../shared).
set -euo pipefail
usage() { sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
n_prompts=3 tokens=192 threads=2 out="" llama_draft="3 5 8" llama_spec="" configs="" llama_extra=""
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --prompts) n_prompts=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --llama-draft) llama_draft=$2; shift 2 ;;
    --llama-spec) llama_spec=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --llama-extra) llama_extra=$2; shift 2 ;;
    *) echo "bench_pair.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
build=${MS_BUILD_DIR:-build/release}
shared=${MS_SHARED_DIR:-../shared}
LB=${LLAMA_BIN:-$HOME/.cache/microspec/llama.cpp-0.3.36/build/bin}
out=${out:-results/gguf/pair-$(date +%Y-%m-%d).md}
G=$build/tools/microspec-generate
for f in "$G" "$LB/llama-bench" "$LB/llama-speculative-simple"; do
  [ -x "$f" ] || { echo "bench_pair.sh: $f is missing (build this engine / tools/build-llamacpp.sh)" >&2; exit 1; }
done
T=$(bash tools/install-models.sh --path qwen2.5-coder-1.5b) D=$(bash tools/install-models.sh --path qwen2.5-coder-0.5b)
[ -f "$T" ] && [ -f "$D" ] || { echo "bench_pair.sh: install the pair: tools/install-models.sh qwen2.5-coder-1.5b qwen2.5-coder-0.5b" >&2; exit 1; }
logs=build/bench-logs/$(basename "$out").logs
rm -rf "$logs"
mkdir -p "$logs" "$(dirname "$out")"
say() { echo "bench_pair: $*" >&2; }

# Configurations of this engine: NAME|flags. AR lines are named ar-*, and a
# speculative line's greedy text is checked against the AR line of its path
# (--f32-matmul lines against ar-exact, the others, on the default 8-bit path,
# against ar-q8).
default_configs="ar-q8|--q8-matmul
spec-q8-dyn-chain4|--q8-matmul --draft @D --draft-kind lm --vocab dynamic --w-max 3072 --chain --tree-depth 3
spec-q8-dyn-chain5|--q8-matmul --draft @D --draft-kind lm --vocab dynamic --w-max 3072 --chain --tree-depth 4
spec-q8-dyn-chain5-p0.7|--q8-matmul --draft @D --draft-kind lm --vocab dynamic --w-max 3072 --chain --tree-depth 4 --draft-p-min 0.7
spec-q8-full-chain5|--q8-matmul --draft @D --draft-kind lm --vocab full --chain --tree-depth 4"
if [ -n "$configs" ]; then cfg_text=$(grep -v '^\s*#' "$configs" | grep -v '^\s*$'); else cfg_text=$default_configs; fi

SYS="You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
python3 - "$shared/data/human_eval/question.jsonl" "$n_prompts" "$logs" <<'PY'
import json, sys
src, n, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i, line in enumerate(open(src)):
    if i >= n: break
    q = json.loads(line)
    user = "Complete the following Python function. Reply with code only.\n\n" + q["prompt"]
    open(f"{d}/p{i}.user", "w").write(user)
PY

calc() { awk "BEGIN { printf \"%.4g\", $1 }"; }
num() { grep -o "$1" "$2" | head -n1 | grep -oE '[0-9]+(\.[0-9]+)?' | head -n1 || true; }
declare -A sum cnt
rows=()
for ((i = 0; i < n_prompts; i++)); do
  user=$(cat "$logs/p$i.user")
  # written directly: a $(...) would drop the template's final newline (llama.cpp alone would see it missing)
  printf '<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$SYS" "$user" \
    >"$logs/p$i.chat"
  ptok=$("$build/tools/microspec-tokenize" --model "$T" <"$logs/p$i.chat" | tr -cd ',' | wc -c)
  ptok=$((ptok + 1))
  line="| $i | $ptok"
  # llama.cpp AR
  say "prompt $i ($ptok tokens): llama-bench"
  "$LB/llama-bench" -m "$T" -p 0 -n "$tokens" -t "$threads" -r 1 -o md >"$logs/p$i.llama-ar" 2>&1 || true
  v=$(grep -E "tg$tokens" "$logs/p$i.llama-ar" | awk -F'|' '{print $(NF-1)}' | awk '{print $1}' || true)
  line="$line | ${v:-?}"; sum[llama-ar]=$(calc "${sum[llama-ar]:-0} + ${v:-0}"); cnt[llama-ar]=$((${cnt[llama-ar]:-0} + 1))
  for k in $llama_draft; do
    say "prompt $i: llama-speculative-simple --spec-draft-n-max $k"
    "$LB/llama-speculative-simple" -m "$T" -md "$D" -f "$logs/p$i.chat" -n "$tokens" --spec-draft-n-max "$k" \
      --spec-type draft-simple --temp 0 --top-k 1 --ignore-eos -t "$threads" -td "$threads" -c 4096 $llama_extra \
      >"$logs/p$i.llama-spec$k.out" 2>"$logs/p$i.llama-spec$k.err" || true
    cat "$logs/p$i.llama-spec$k.out" "$logs/p$i.llama-spec$k.err" >"$logs/p$i.llama-spec$k"
    v=$(grep -o 'decoded.*speed: *[0-9.]*' "$logs/p$i.llama-spec$k" | grep -oE '[0-9.]+$' | head -n1 || true)
    acc=$(grep -oE '(^| )accept += *[0-9.]+' "$logs/p$i.llama-spec$k" | grep -oE '[0-9.]+$' | head -n1 || true)
    line="$line | ${v:-?} (${acc:-?}%)"
    sum[llama-spec$k]=$(calc "${sum[llama-spec$k]:-0} + ${v:-0}"); cnt[llama-spec$k]=$((${cnt[llama-spec$k]:-0} + 1))
  done
  for ts in $llama_spec; do
    type=${ts%%:*} k="" md=()
    [ "$type" = "$ts" ] || k=${ts#*:}
    case $type in *draft-*) md=(-md "$D") ;; esac
    nm="llama-${type//,/+}${k:+-$k}"
    say "prompt $i: llama-speculative-simple --spec-type $type${k:+ --spec-draft-n-max $k}"
    # shellcheck disable=SC2086 # llama_extra is a list of options
    "$LB/llama-speculative-simple" -m "$T" "${md[@]}" -f "$logs/p$i.chat" -n "$tokens" ${k:+--spec-draft-n-max "$k"} \
      --spec-type "$type" --temp 0 --top-k 1 --ignore-eos -t "$threads" -td "$threads" -c 4096 $llama_extra \
      >"$logs/p$i.$nm.out" 2>"$logs/p$i.$nm.err" || true
    cat "$logs/p$i.$nm.out" "$logs/p$i.$nm.err" >"$logs/p$i.$nm"
    v=$(grep -o 'decoded.*speed: *[0-9.]*' "$logs/p$i.$nm" | grep -oE '[0-9.]+$' | head -n1 || true)
    acc=$(grep -oE '(^| )accept += *[0-9.]+' "$logs/p$i.$nm" | grep -oE '[0-9.]+$' | head -n1 || true)
    line="$line | ${v:-?} (${acc:-?}%)"
    sum[$nm]=$(calc "${sum[$nm]:-0} + ${v:-0}"); cnt[$nm]=$((${cnt[$nm]:-0} + 1))
  done
  while IFS='|' read -r name flags; do
    [ -n "$name" ] || continue
    flags=${flags//@D/$D}
    say "prompt $i: $name"
    # shellcheck disable=SC2086 # flags are a list of options
    "$G" --model "$T" --chat --system "$SYS" --prompt "$user" -n "$tokens" --ignore-eos --threads "$threads" \
      $flags >"$logs/p$i.$name.txt" 2>"$logs/p$i.$name.err" || say "  $name exited non-zero (see $logs/p$i.$name.err)"
    v=$(grep -o 'speed: [0-9.]* tokens/s end to end, [0-9.]* tokens/s after prefill' "$logs/p$i.$name.err" |
      grep -oE '[0-9.]+ tokens/s after' | grep -oE '^[0-9.]+' || true)
    [ -n "$v" ] || v=$(num 'decode: [0-9.]* tok/s' "$logs/p$i.$name.err")
    mal=$(num 'mean accepted length: [0-9.]*' "$logs/p$i.$name.err")
    case $name in
      ar-*) ;;
      *)
        ref=ar-q8
        case $flags in *--f32-matmul*) ref=ar-exact ;; esac
        if [ -f "$logs/p$i.$ref.txt" ] && ! cmp -s "$logs/p$i.$ref.txt" "$logs/p$i.$name.txt"; then
          say "  LOSSLESSNESS FAILURE: $name's text differs from $ref's on prompt $i"
          echo "$name p$i" >>"$logs/failures"
        fi
        ;;
    esac
    line="$line | ${v:-?}${mal:+ ($mal)}"
    sum[$name]=$(calc "${sum[$name]:-0} + ${v:-0}"); cnt[$name]=$((${cnt[$name]:-0} + 1))
  done <<<"$cfg_text"
  rows+=("$line |")
done

names=(llama-ar)
for k in $llama_draft; do names+=("llama-spec$k"); done
for ts in $llama_spec; do
  type=${ts%%:*} k=""
  [ "$type" = "$ts" ] || k=${ts#*:}
  names+=("llama-${type//,/+}${k:+-$k}")
done
while IFS='|' read -r name _; do [ -n "$name" ] && names+=("$name"); done <<<"$cfg_text"
mean() { awk "BEGIN { printf \"%.2f\", ${sum[$1]:-0} / ${cnt[$1]:-1} }"; }
{
  echo "# The real pair on this CPU, beside llama.cpp: Qwen2.5-Coder 1.5B target, 0.5B draft"
  echo
  echo "- Command: \`tools/bench/bench_pair.sh --prompts $n_prompts --tokens $tokens --threads $threads\` (MS_BUILD_DIR=$build)"
  echo "- Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $threads threads;" \
    "$(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes')"
  echo "- Prompts: the first $n_prompts HumanEval tasks as ChatML chats (Qwen's default system line), greedy," \
    "$tokens new tokens, EOS ignored. Decode speeds in tokens/s (prefill excluded); in brackets: llama.cpp's" \
    "acceptance rate, this engine's mean accepted tokens per verify. llama.cpp 0c1e57098 (llama-cpp-python 0.3.36)."
  echo "- Order per prompt: llama-bench AR, llama-speculative-simple per draft length, then this engine's lines."
  echo
  printf '| prompt | prompt tokens |'
  for n in "${names[@]}"; do printf ' %s |' "$n"; done
  echo
  printf '|---|---|'
  for _ in "${names[@]}"; do printf -- '---|'; done
  echo
  printf '%s\n' "${rows[@]}"
  printf '| mean | |'
  for n in "${names[@]}"; do printf ' %s |' "$(mean "$n")"; done
  echo
  echo
  base=$(mean llama-ar)
  best_llama=0
  for n in "${names[@]}"; do
    case $n in llama-ar) continue ;; llama-*) ;; *) continue ;; esac
    m=$(mean "$n")
    [ "$(awk "BEGIN { print ($m > $best_llama) }")" = 1 ] && best_llama=$m
  done
  # this engine's AR row of the same matmul path (ar-q8 or ar), the speedup the claim is about
  ours=""
  for n in "${names[@]}"; do case $n in ar-q8 | ar) [ -z "$ours" ] && ours=$(mean "$n") ;; esac; done
  head="Ratios of the means: over llama.cpp AR ($base)"
  [ -n "$ours" ] && head+=", over this engine's AR ($ours)"
  [ "$best_llama" != 0 ] && head+=" and over llama.cpp's best speculative ($best_llama)"
  echo "$head:"
  echo
  ratio() { awk "BEGIN { printf \"%.2f\", $1 / ($2 + 1e-9) }"; }
  for n in "${names[@]}"; do
    m=$(mean "$n")
    line="- $n: $m tok/s = $(ratio "$m" "$base")x llama.cpp AR"
    [ -n "$ours" ] && line+=", $(ratio "$m" "$ours")x this engine's AR"
    [ "$best_llama" != 0 ] && line+=", $(ratio "$m" "$best_llama")x llama.cpp speculative"
    echo "$line"
  done
  # llama.cpp's text against this engine's first AR line's
  ours_ar=""
  for n in "${names[@]}"; do case $n in ar-*) [ -z "$ours_ar" ] && ours_ar=$n ;; esac; done
  if [ -n "$ours_ar" ] && [ "${#names[@]}" -gt 1 ]; then
    echo
    echo "llama.cpp's generated text against $ours_ar's, per prompt (identical, or the byte where they part):"
    echo
    for n in "${names[@]}"; do
      case $n in llama-ar | ar-* | spec-*) continue ;; llama-*) ;; *) continue ;; esac
      printf -- '- %s:' "$n"
      for ((i = 0; i < n_prompts; i++)); do
        printf ' p%d %s;' "$i" "$(python3 - "$logs/p$i.chat" "$logs/p$i.$n.out" "$logs/p$i.$ours_ar.txt" <<'PY'
import sys
out, ours = (open(f, "rb").read() for f in sys.argv[2:4])
# stdout echoes the prompt up to its last token (the template's final "\n"), then the generated text
mark = b"<|im_start|>assistant"
gen = out[out.rfind(mark) + len(mark):] if mark in out else None
if gen is not None and gen.startswith(b"\n") and not ours.startswith(b"\n"):
    gen = gen[1:]
if not gen:
    print("no text")
else:
    a, b = gen.rstrip(), ours.rstrip()
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    print("identical" if k == min(len(a), len(b)) else "parts at byte %d of %d" % (k, len(b)))
PY
)"
      done
      echo
    done
  fi
  if [ -f "$logs/failures" ]; then
    echo
    echo "LOSSLESSNESS FAILURES (speculative text != AR text): $(tr '\n' ' ' <"$logs/failures")"
  else
    echo
    echo "Every speculative configuration of this engine gave its AR configuration's text, prompt by prompt."
  fi
} >"$out"
cat "$out"
[ ! -f "$logs/failures" ]
