#!/usr/bin/env bash
# test_bench.sh BUILD_DIR SHARED_DIR — the reduced benchmark run
# (tools/microspec_bench.sh + tools/microspec_report.sh) on stories260K:
# 2 questions per category, 24 new tokens, four configurations (AR, full
# vocabulary, dynamic W_max 32 and 128). Checks consistency, not numbers:
# every table has every row and column, the cells parse as numbers, the first
# row (AR) has speedup 1.00 and accepted length 1.00, results.jsonl has a
# line per question × configuration and the summary agrees with it, and the
# W_max plot is a real PNG (skipped without gnuplot). Exit 77 without ../shared.
set -u
build=$1 shared=$2
[ -f "$shared/models/stories260k/stories260K.bin" ] && [ -f "$shared/data/spec_bench/question.jsonl" ] ||
  { echo "SKIP: $shared absent"; exit 77; }
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() { # check CONDITION-STATUS MESSAGE
  if [ "$1" != 0 ]; then echo "FAIL: $2"; fail=1; fi
}

per_cat=2 n_tok=24 tree=""
# sanitizer builds: the same checks on a smaller run (fewer prompts and tokens, a small tree)
if [ -n "${BENCH_SMALL:-}" ]; then per_cat=1 n_tok=8 tree="--tree-k 4 --tree-depth 2 --tree-total 8"; fi
ls4="--draft-kind layerskip --draft-layers 4 $tree"
cat >"$work/configs.txt" <<EOC
# name|flags
AR|
full|$ls4 --vocab full
dynamic W_max=32|$ls4 --vocab dynamic --w-max 32
dynamic W_max=128|$ls4 --vocab dynamic --w-max 128
EOC
out=$work/out
"$build/tools/convert-llama2c" "$shared/models/stories260k/stories260K.bin" "$shared/models/stories260k/tok512.bin" \
  "$work/model" >/dev/null 2>&1 || { echo "FAIL: convert-llama2c"; exit 1; }
MS_BUILD_DIR=$build MS_SHARED_DIR=$shared "$src/tools/microspec_bench.sh" --out "$out" --configs "$work/configs.txt" \
  --model "$work/model" --max-chars 600 --per-category "$per_cat" --max-new-sb "$n_tok" --max-new-he "$n_tok" 2>"$work/err"
rc=$?
check $rc "microspec_bench.sh exited $rc: $(tail -5 "$work/err")"
grep -q '\[##############################\]' "$work/err"; check $? "no complete progress bar on stderr"
for f in results.jsonl summary.jsonl configs.tsv meta.txt report.md; do
  [ -s "$out/$f" ]; check $? "$f missing or empty"
done
[ $fail = 0 ] || exit 1

# results: 7 categories × per_cat questions × 4 configurations, no warm-up lines
n=$(wc -l <"$out/results.jsonl")
want=$((7 * per_cat * 4))
[ "$n" = "$want" ]; check $? "results.jsonl has $n lines, want $want"
for c in MT Conv RAG Math QA Summ Code; do
  k=$(grep -c "\"category\": \"$c\"" "$out/results.jsonl")
  [ "$k" = $((per_cat * 4)) ]; check $? "category $c: $k result lines, want $((per_cat * 4))"
done
# the summary's tokens/s = the mean of the per-question values
bad=$(awk '
  function num(key) { match($0, "\"" key "\": [0-9.e+-]+"); return substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 4) + 0 }
  function str(key) { match($0, "\"" key "\": \"[^\"]*\""); return substr($0, RSTART + length(key) + 5, RLENGTH - length(key) - 6) }
  FNR == NR { k = str("config") SUBSEP str("category"); s[k] += num("tokens_per_s"); q[k]++; next }
  str("category") != "Avg" { k = str("config") SUBSEP str("category")
    if (q[k] != num("questions") || (s[k] / q[k] - num("tokens_per_s"))^2 > 1e-4 * (1 + s[k] / q[k])^2) print }
  ' "$out/results.jsonl" "$out/summary.jsonl")
[ -z "$bad" ]; check $? "summary disagrees with results: $bad"

# the tables: every row and column, numbers in every cell
md=$out/report.md
hdr_speed='| method | MT | Conv | RAG | Math | QA | Summ | Code | Avg speed | Speedup | Avg accepted length |'
hdr_acc='| method | MT | Conv | RAG | Math | QA | Summ | Code | Avg |'
grep -qxF "$hdr_speed" "$md"; check $? "speed table header missing"
grep -qxF "$hdr_acc" "$md"; check $? "accepted-length table header missing"
for name in AR full "dynamic W_max=32" "dynamic W_max=128"; do
  rows=$(grep -F "| $name |" "$md" | grep -v '`')
  [ "$(wc -l <<<"$rows")" = 2 ]; check $? "row '$name': want one per table, got: $rows"
  sp=$(sed -n 1p <<<"$rows") ac=$(sed -n 2p <<<"$rows")
  awk -F'|' '{ if (NF != 13) exit 1; for (i = 3; i <= 12; i++) { v = $i; gsub(/[ ×]/, "", v); if (v !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 } }' <<<"$sp"
  check $? "speed row '$name' does not have 10 numeric cells: $sp"
  awk -F'|' '{ if (NF != 11) exit 1; for (i = 3; i <= 10; i++) { v = $i; gsub(/ /, "", v); if (v !~ /^[0-9]+\.[0-9]+$/) exit 1 } }' <<<"$ac"
  check $? "accepted-length row '$name' does not have 8 numeric cells: $ac"
  if [ "$name" = AR ]; then
    awk -F'|' '{ s = $11; a = $12; gsub(/[ ×]/, "", s); gsub(/ /, "", a); exit !(s == "1.00" && a == "1.00") }' <<<"$sp"
    check $? "AR speedup / accepted length not 1.00: $sp"
    awk -F'|' '{ for (i = 3; i <= 10; i++) { v = $i; gsub(/ /, "", v); if (v != "1.00") exit 1 } }' <<<"$ac"
    check $? "AR accepted length not 1.00 in every category: $ac"
  else
    awk -F'|' '{ a = $12 + 0; exit !(a >= 1.0) }' <<<"$sp"; check $? "'$name' accepted length below 1: $sp"
  fi
done
grep -q '^- commit: ' "$md" && grep -q '^- command: ' "$md" && grep -q '^- machine: ' "$md"
check $? "report header lacks machine / commit / command"

# the plot
if command -v gnuplot >/dev/null; then
  grep -qF '![W_max sweep](wmax.png)' "$md"; check $? "report does not link wmax.png"
  info=$("$build/tests/png_info" "$out/wmax.png" 400 200); check $? "wmax.png is not a real PNG of at least 400x200"
  echo "wmax.png: $info"
else
  echo "gnuplot not installed: PNG sub-check skipped"
fi
[ $fail = 0 ] && echo "bench_reduced: ok ($(sed -n 's/^runtime: //p' "$out/meta.txt") of generation)"
exit $fail
