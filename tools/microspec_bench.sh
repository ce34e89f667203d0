#!/usr/bin/env bash
# microspec_bench.sh — the benchmark driver (issue 7): runs Spec-Bench and
# HumanEval prompts through a list of configurations with microspec-generate
# in batch mode, following eagle2-frspec-notes §5: greedy, max new tokens
# 1024 (Spec-Bench) / 512 (HumanEval), the first question run 3× untimed as
# warm-up in the same process, wall time incl. prefill, tokens/s per question
# averaged over questions. Then tools/microspec_report.sh renders the tables
# and plots.
#
#   tools/microspec_bench.sh [options]
#     --out DIR           results folder (default results/bench)
#     --configs FILE      configurations, one a line: "NAME|microspec-generate flags"
#                         ('#' comments; @OUT@ in flags = the results folder). The first
#                         line is the baseline of the speedup (AR). Default: the
#                         stories260K list below.
#     --model DIR         target model (default: stories260K converted into
#                         $MS_BUILD_DIR/models/stories260k)
#     --per-category N    questions per category (default all)
#     --max-new-sb N      max new tokens, Spec-Bench (default 1024)
#     --max-new-he N      max new tokens, HumanEval (default 512)
#     --max-chars N       cut prompts to N bytes (default 600 for stories260K, whose
#                         context is 512 tokens; 0 = no cut)
#     --chat              render prompts through the chat template (models that have one)
#     --no-report         do not run microspec_report.sh
#
# Writes DIR/results.jsonl (a line per question and configuration: config,
# dataset, category, source_category, question_id, tokens_per_s and
# microspec-generate's per-prompt statistics), DIR/summary.jsonl (a line per
# configuration × category, and category "Avg" with the speedup), configs.tsv,
# meta.txt (machine, date, commit, command) and logs/. Progress on stderr.
#
# Deviations from the protocol, on stories260K: no chat template (prompts
# encoded raw, BOS first), prompts cut to --max-chars, only the first turn of
# the MT-bench questions (microspec-generate's batch mode is single-turn).
#
# Environment: MS_BUILD_DIR (default build), MS_SHARED_DIR (default ../shared).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${MS_BUILD_DIR:-build}
shared=${MS_SHARED_DIR:-../shared}
T=$build/tools
out=results/bench configs="" model="" per_cat="" max_sb=1024 max_he=512 max_chars="" chat="" report=1
argv=("$@")
die() { echo "microspec_bench: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --per-category) per_cat=$2; shift 2 ;;
    --max-new-sb) max_sb=$2; shift 2 ;;
    --max-new-he) max_he=$2; shift 2 ;;
    --max-chars) max_chars=$2; shift 2 ;;
    --chat) chat=--chat; shift ;;
    --no-report) report=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for b in microspec-generate microspec-bench-prompts convert-llama2c microspec-freqlist; do
  [ -x "$T/$b" ] || die "$T/$b not found (build first, or set MS_BUILD_DIR)"
done
sb=$shared/data/spec_bench/question.jsonl he=$shared/data/human_eval/question.jsonl
[ -r "$sb" ] && [ -r "$he" ] || die "$sb or $he missing (set MS_SHARED_DIR)"
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -z "$model" ]; then
  model=$build/models/stories260k
  src=$shared/models/stories260k
  mkdir -p "$(dirname "$model")"
  [ -f "$model/config.json" ] || "$T/convert-llama2c" "$src/stories260K.bin" "$src/tok512.bin" "$model" >/dev/null 2>&1 ||
    die "converting $src failed"
  max_chars=${max_chars:-600}
fi
max_chars=${max_chars:-0}

if [ -z "$configs" ]; then
  # stories260K: the draft is the target's first 4 layers; static list = top-64
  # corpus ids; the dynamic window swept over W_max.
  "$T/microspec-freqlist" --tokenizer "$model" --k 64 --out "$out/static-64.txt" \
    "$shared/corpus/tinyshakespeare.txt" "$shared/corpus/wikitext2_valid.txt" 2>/dev/null ||
    die "microspec-freqlist failed"
  configs=$work/configs.txt
  ls4="--draft-kind layerskip --draft-layers 4"
  cat >"$configs" <<EOF
AR (target alone)|
layerskip L=4, full vocabulary|$ls4 --vocab full
layerskip L=4, static K=64|$ls4 --vocab static --vocab-list @OUT@/static-64.txt
layerskip L=4, dynamic W_max=32|$ls4 --vocab dynamic --w-max 32
layerskip L=4, dynamic W_max=64|$ls4 --vocab dynamic --w-max 64
layerskip L=4, dynamic W_max=128|$ls4 --vocab dynamic --w-max 128
layerskip L=4, dynamic W_max=256|$ls4 --vocab dynamic --w-max 256
EOF
fi
[ -r "$configs" ] || die "$configs: cannot read"

# configs.tsv: index, name, vocabulary, W_max (dynamic only), series (the
# flags without --w-max: configurations that differ only in W_max), flags
names=() flags=()
: >"$out/configs.tsv"
while IFS= read -r line || [ -n "$line" ]; do
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  [[ "$line" == *"|"* ]] || die "$configs: '$line' is not NAME|flags"
  name=${line%%|*} fl=${line#*|}
  [[ "$name" =~ ^[^\"\\$'\t']+$ ]] || die "$configs: name '$name' is empty or has a quote, backslash or tab"
  fl=${fl//@OUT@/$out}
  names+=("$name") flags+=("$fl")
  vocab=—  # the same rule as microspec-generate: any draft flag makes it speculative, dynamic by default
  case " $fl " in *" --draft"* | *" --vocab"* | *" --w-max"* | *" --k-"* | *" --tree-"* | *" --chain"*) vocab=dynamic ;; esac
  [[ " $fl " =~ \ --vocab\ ([a-z]+) ]] && vocab=${BASH_REMATCH[1]}
  wmax=""; [ "$vocab" = dynamic ] && { wmax=3072; [[ " $fl " =~ \ --w-max\ ([0-9]+) ]] && wmax=${BASH_REMATCH[1]}; }
  series=$(sed -E 's/(^| )--w-max [0-9]+//' <<<"$fl")
  printf '%d\t%s\t%s\t%s\t%s\t%s\n' "${#names[@]}" "$name" "$vocab" "$wmax" "$series" "$fl" >>"$out/configs.tsv"
done <"$configs"
[ ${#names[@]} -gt 0 ] || die "$configs: no configurations"

# the prompt sets: warm-up copies first, then the categories in column order
pc=(); [ -n "$per_cat" ] && pc=(--per-category "$per_cat")
mc=(); [ "$max_chars" != 0 ] && mc=(--max-chars "$max_chars")
"$T/microspec-bench-prompts" --spec-bench "$sb" "${pc[@]}" "${mc[@]}" --out-jsonl "$work/sb.jsonl" --out-manifest "$work/sb.tsv"
"$T/microspec-bench-prompts" --human-eval "$he" "${pc[@]}" "${mc[@]}" --out-jsonl "$work/he.jsonl" --out-manifest "$work/he.tsv"
datasets=(sb he)
declare -A dsname=([sb]=spec_bench [he]=human_eval) maxnew=([sb]=$max_sb [he]=$max_he)
total=0
for ds in "${datasets[@]}"; do total=$(( total + $(wc -l <"$work/$ds.tsv") * ${#names[@]} )); done

# progress bar: questions done (warm-up included) over all runs
done_q=0
bar() { # bar DONE LABEL
  local w=30 f=$(( $1 * 30 / total ))
  printf '\r[%-*s] %d/%d %s\033[K' $w "$(printf '%*s' $f '' | tr ' ' '#')" "$1" "$total" "$2" >&2
}

t_start=$(date +%s.%N)
: >"$out/results.jsonl"
for i in "${!names[@]}"; do
  name=${names[$i]}
  for ds in "${datasets[@]}"; do
    nq=$(wc -l <"$work/$ds.tsv") stats=$work/stats-$i-$ds.jsonl log=$out/logs/$((i + 1))-$ds.log
    : >"$stats"
    # shellcheck disable=SC2086 # the flags are words
    "$T/microspec-generate" --model "$model" $chat --prompts-jsonl "$work/$ds.jsonl" -n "${maxnew[$ds]}" --quiet \
      --stats-out "$stats" ${flags[$i]} >"$log" 2>"$log.err" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      bar $(( done_q + $(wc -l <"$stats") )) "$name, ${dsname[$ds]}"
      sleep 0.2
    done
    wait "$pid" || { echo >&2; cat "$log.err" >&2; die "config '$name' on ${dsname[$ds]} failed (log: $log.err)"; }
    done_q=$(( done_q + nq ))
    bar $done_q "$name, ${dsname[$ds]}"
    # one result line per timed question: manifest columns + the statistics
    awk -F'\t' -v cfg="$name" -v ds="${dsname[$ds]}" '
      NR == FNR { cat[$1] = $2; src[$1] = $3; qid[$1] = $4; warm[$1] = $5; next }
      {
        match($0, /"index": [0-9]+/); i = substr($0, RSTART + 9, RLENGTH - 9) + 0
        if (warm[i]) next
        match($0, /"new_tokens": [0-9]+/); nt = substr($0, RSTART + 14, RLENGTH - 14) + 0
        match($0, /"wall_s": [0-9.]+/); w = substr($0, RSTART + 10, RLENGTH - 10) + 0
        printf "{\"config\": \"%s\", \"dataset\": \"%s\", \"category\": \"%s\", \"source_category\": \"%s\", " \
               "\"question_id\": \"%s\", \"tokens_per_s\": %.3f, %s\n", cfg, ds, cat[i], src[i], qid[i],
               (w > 0 ? nt / w : 0), substr($0, 2)
      }' "$work/$ds.tsv" "$stats" >>"$out/results.jsonl"
    skipped=$(grep -c 'no room' "$log.err" || true)
    [ "$skipped" = 0 ] || echo -e "\nmicrospec_bench: $name, ${dsname[$ds]}: $skipped prompt(s) too long for the context, skipped" >&2
  done
done
t_end=$(date +%s.%N)
echo >&2

# summary: per configuration × category, tokens/s = mean over questions,
# accepted length = tokens per target forward over all rounds (Σ emitted /
# Σ rounds); "Avg" = the mean of the category values, speedup = Avg tokens/s
# over the first configuration's.
awk -v cats="MT Conv RAG Math QA Summ Code" '
  function num(key,   v) { if (!match($0, "\"" key "\": [0-9.e+-]+")) return 0
                           v = substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 4); return v + 0 }
  function str(key) { match($0, "\"" key "\": \"[^\"]*\""); return substr($0, RSTART + length(key) + 5, RLENGTH - length(key) - 6) }
  {
    c = str("config"); k = str("category")
    if (!(c in seen)) { seen[c] = 1; order[++nc] = c }
    key = c SUBSEP k
    q[key]++; tps[key] += num("tokens_per_s"); nt[key] += num("new_tokens"); wall[key] += num("wall_s")
    r = num("rounds"); rounds[key] += r; emitted[key] += num("mean_accepted") * r
  }
  END {
    ncat = split(cats, cl, " ")
    for (j = 1; j <= nc; j++) {
      c = order[j]; s = 0; a = 0; m = 0
      for (t = 1; t <= ncat; t++) {
        key = c SUBSEP cl[t]
        if (!(key in q)) continue
        sp = tps[key] / q[key]; al = rounds[key] > 0 ? emitted[key] / rounds[key] : 0
        printf "{\"config\": \"%s\", \"category\": \"%s\", \"questions\": %d, \"new_tokens\": %d, \"wall_s\": %.6f, " \
               "\"tokens_per_s\": %.3f, \"accepted_length\": %.4f}\n", c, cl[t], q[key], nt[key], wall[key], sp, al
        s += sp; a += al; m++
      }
      avg[j] = m ? s / m : 0
      printf "{\"config\": \"%s\", \"category\": \"Avg\", \"categories\": %d, \"tokens_per_s\": %.3f, " \
             "\"speedup\": %.4f, \"accepted_length\": %.4f}\n", c, m, avg[j], (avg[1] > 0 ? avg[j] / avg[1] : 0), (m ? a / m : 0)
    }
  }' "$out/results.jsonl" >"$out/summary.jsonl"

if commit=$(git rev-parse --short HEAD 2>/dev/null); then
  [ -z "$(git status --porcelain -- . ':(exclude)results' ':(exclude)build*' 2>/dev/null)" ] ||
    commit="$commit (with uncommitted changes)"
else
  commit=unknown
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
{
  echo "machine: $(uname -n), $(uname -sm), ${cpu:-unknown CPU}, $(nproc) cores"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "commit: $commit"
  echo "command: ${MS_BUILD_DIR:+MS_BUILD_DIR=$MS_BUILD_DIR }${MS_SHARED_DIR:+MS_SHARED_DIR=$MS_SHARED_DIR }tools/microspec_bench.sh ${argv[*]}"
  echo "model: $model"
  echo "protocol: greedy; max new tokens $max_sb (Spec-Bench) / $max_he (HumanEval); ${per_cat:-all} question(s) per category; first question 3x untimed; prompts $([ -n "$chat" ] && echo "through the chat template" || echo "encoded raw (no chat template)")$([ "$max_chars" != 0 ] && echo ", cut to $max_chars bytes"); first turn only; single thread"
  echo "runtime: $(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }') s"
} >"$out/meta.txt"
echo "microspec_bench: wrote $out/results.jsonl, $out/summary.jsonl" >&2
[ "$report" = 0 ] || "$root/tools/microspec_report.sh" "$out"
