#!/usr/bin/env bash
# coverage_report.sh [OUT_DIR [extra microspec-coverage options...]]
#
# The model-free coverage study (tools/dev/microspec_coverage.c): Qwen3 and
# Llama-3 tokenizers over the Spec-Bench prompts that have references and
# HumanEval, context-only dynamic window vs static top-K corpus lists.
# Writes OUT_DIR (default results/coverage): coverage.md (header with the
# machine, date, commit and exact command, then the definitions and tables),
# coverage.csv, and coverage_<tokenizer>.png per tokenizer (gnuplot, when
# installed). Extra options go to microspec-coverage after the defaults (a
# later --w-max / --k / --max-per-category replaces the default).
#
# Environment: MS_BUILD_DIR (default build/release, what tools/demo.sh builds; the binary is
# $MS_BUILD_DIR/tools/microspec-coverage), MS_SHARED_DIR (default ../shared).
set -euo pipefail
# --help prints the header above. Options after OUT_DIR go to microspec-coverage;
# an option in OUT_DIR's place is refused (exit 2).
case "${1:-}" in
  -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "coverage_report.sh: unknown option $1 (see --help; OUT_DIR comes first)" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${1:-results/coverage}
[ $# -gt 0 ] && shift
build=${MS_BUILD_DIR:-build/release}
shared=${MS_SHARED_DIR:-../shared}
bin=$build/tools/microspec-coverage
[ -x "$bin" ] || { echo "coverage_report: $bin not found (build first, or set MS_BUILD_DIR)" >&2; exit 1; }
for f in "$shared"/tokenizers/{qwen3,llama3}/tokenizer.json "$shared"/data/spec_bench/question.jsonl \
         "$shared"/data/human_eval/question.jsonl; do
  [ -r "$f" ] || { echo "coverage_report: $f missing (set MS_SHARED_DIR)" >&2; exit 1; }
done
mkdir -p "$out"

# K 128/256/512 are extra rows next to the studied 1k..32k: the context-only
# window reaches only a few hundred distinct ids, and these give the static
# list at a comparable size.
cmd=("$bin"
     --tokenizer "$shared/tokenizers/qwen3/tokenizer.json"
     --tokenizer "$shared/tokenizers/llama3/tokenizer.json"
     --spec-bench "$shared/data/spec_bench/question.jsonl"
     --human-eval "$shared/data/human_eval/question.jsonl")
for c in "$shared"/corpus/*.txt; do cmd+=(--corpus "$c"); done
cmd+=(--w-max 1024,2048,3072,4096,8192,16384,32768
      --k 128,256,512,1024,2048,3072,4096,8192,16384,32768
      "$@" --csv "$out/coverage.csv" --md "$out/coverage.body.md")

t0=$(date +%s.%N)
"${cmd[@]}"
t1=$(date +%s.%N)

if commit=$(git rev-parse HEAD 2>/dev/null); then
  # the outputs themselves (results/) do not count as changes
  [ -z "$(git status --porcelain -- . ':(exclude)results' ':(exclude)build*' 2>/dev/null)" ] ||
    commit="$commit (with uncommitted changes)"
else
  commit=unknown
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
{
  echo "# Coverage study: context-only dynamic window vs static top-K (no model)"
  echo
  echo "The temporal-locality premise of MicroSpec (docs/architecture.md §5), measured with real tokenizers and"
  echo "real prompts/references and no model: how many reference-continuation tokens are already in the"
  echo "recent context (the dynamic window), against an FR-Spec static frequency list of the same size."
  echo "Figures: \`coverage_qwen3.png\`, \`coverage_llama3.png\` (overall coverage vs vocabulary size);"
  echo "data: \`coverage.csv\` (one row per tokenizer × category × method)."
  echo
  echo "- Machine: $(uname -n), $(uname -sm), ${cpu:-unknown CPU}, $(nproc) cores"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- Commit: $commit"
  echo "- Command: \`${MS_BUILD_DIR:+MS_BUILD_DIR=$MS_BUILD_DIR }${MS_SHARED_DIR:+MS_SHARED_DIR=$MS_SHARED_DIR }tools/dev/coverage_report.sh $out${*:+ $*}\`, which ran (in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s):"
  echo
  echo '```'
  sep=""
  for a in "${cmd[@]}"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./,=+:-]+$ ]]; then printf '%s%s' "$sep" "$a"; else printf '%s%q' "$sep" "$a"; fi
    sep=" "
  done
  echo
  echo '```'
  echo
  echo "## Headline (overall, all categories pooled)"
  echo
  awk -F, 'NR > 1 && $2 == "overall" {
      key = $1; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
      if ($3 == "dynamic") dyn[key] = dyn[key] sprintf("%sW_max=%s: %.2f%% (mean |I| %.0f)", dyn[key] ? ", " : "", $4, 100 * $9, $10)
      else sta[key] = sta[key] sprintf("%sK=%s: %.2f%%", sta[key] ? ", " : "", $4, 100 * $9)
    }
    END { for (i = 1; i <= n; i++) printf "- **%s** — dynamic context-only: %s.  \n  static top-K: %s.\n", order[i], dyn[order[i]], sta[order[i]] }' \
    "$out/coverage.csv"
  echo
  cat "$out/coverage.body.md"
} > "$out/coverage.md.tmp"
mv "$out/coverage.md.tmp" "$out/coverage.md"
rm -f "$out/coverage.body.md"

if ! command -v gnuplot >/dev/null; then
  echo "coverage_report: gnuplot not installed (Debian: gnuplot-nox); no plots" >&2
  exit 0
fi
term=png
gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo && term=pngcairo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for tok in $(awk -F, 'NR > 1 { print $1 }' "$out/coverage.csv" | uniq); do
  # overall rows: size, coverage in %, mean |I|
  for m in static dynamic; do
    awk -F, -v t="$tok" -v m="$m" '$1 == t && $2 == "overall" && $3 == m { print $4, 100 * $9, $10 }' \
      "$out/coverage.csv" > "$tmp/$m.dat"
  done
  maxwin=$(awk 'BEGIN { x = 0 } $3 > x { x = $3 } END { printf "%.0f", x }' "$tmp/dynamic.dat")
  gnuplot <<EOF
set terminal $term size 900,600 $([ "$term" = pngcairo ] && echo "font 'sans,11'")
set output '$out/coverage_$tok.png'
set title "Coverage of reference tokens, $tok tokenizer (Spec-Bench with references + HumanEval, overall)"
set xlabel 'vocabulary size: K (static) or W_{max} (dynamic)'
set ylabel 'coverage (% of reference tokens inside)'
set logscale x 2
set xrange [960:34000]
set xtics ('1k' 1024, '2k' 2048, '4k' 4096, '8k' 8192, '16k' 16384, '32k' 32768)
set yrange [0:100]
set grid
set key bottom right box
plot '$tmp/static.dat' using 1:2 with linespoints lw 2 pt 7 title 'static top-K (corpus frequency list)', \
     '$tmp/dynamic.dat' using 1:2 with linespoints lw 2 pt 5 \
       title sprintf('dynamic context-only window, x = W_{max} (mean |I| reached <= %s ids)', '$maxwin')
EOF
  echo "coverage_report: wrote $out/coverage_$tok.png" >&2
done
echo "coverage_report: wrote $out/coverage.md and $out/coverage.csv" >&2
