#!/usr/bin/env bash
# microspec_report.sh DIR — renders what tools/microspec_bench.sh wrote in DIR
# (summary.jsonl, configs.tsv, meta.txt) as DIR/report.md: the paper's layout
# (rows = methods; columns MT Conv RAG Math QA Summ Code, then Avg speed,
# speedup over the first configuration and Avg accepted length), a second
# table of accepted length per category, and — when configurations differ
# only in W_max (a dynamic sweep) — DIR/wmax.png (gnuplot): tokens/s and
# accepted length against W_max, one line per sweep.
set -euo pipefail
dir=${1:?usage: microspec_report.sh DIR}
for f in summary.jsonl configs.tsv meta.txt; do
  [ -r "$dir/$f" ] || { echo "microspec_report: $dir/$f missing (run tools/microspec_bench.sh first)" >&2; exit 1; }
done
cats="MT Conv RAG Math QA Summ Code"

# flat "config<TAB>category<TAB>tokens_per_s<TAB>accepted_length<TAB>speedup<TAB>questions"
flat=$(awk '
  function num(key) { if (!match($0, "\"" key "\": [0-9.e+-]+")) return ""
                      return substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 4) + 0 }
  function str(key) { match($0, "\"" key "\": \"[^\"]*\""); return substr($0, RSTART + length(key) + 5, RLENGTH - length(key) - 6) }
  { printf "%s\t%s\t%s\t%s\t%s\t%s\n", str("config"), str("category"), num("tokens_per_s"), num("accepted_length"),
           num("speedup"), num("questions") }' "$dir/summary.jsonl")

table() { # table speed|accept
  awk -F'\t' -v cats="$cats" -v what="$1" '
    NR == FNR { names[++n] = $2; next }
    { v[$1, $2] = (what == "speed" ? $3 : $4); sp[$1, $2] = $5; q[$1, $2] = $6 }
    END {
      nc = split(cats, c, " ")
      printf "| method |"; for (j = 1; j <= nc; j++) printf " %s |", c[j]
      if (what == "speed") print " Avg speed | Speedup | Avg accepted length |"; else print " Avg |"
      printf "|---|"; for (j = 1; j <= nc; j++) printf "---:|"
      print (what == "speed" ? "---:|---:|---:|" : "---:|")
      for (i = 1; i <= n; i++) {
        m = names[i]; printf "| %s |", m
        for (j = 1; j <= nc; j++) printf " %s |", (m SUBSEP c[j]) in v ? sprintf(what == "speed" ? "%.1f" : "%.2f", v[m, c[j]]) : "—"
        if (what == "speed") printf " %.1f | %.2f× | %.2f |\n", v[m, "Avg"], sp[m, "Avg"], acc[m]
        else printf " %.2f |\n", v[m, "Avg"]
      }
    }' "$dir/configs.tsv" - <<<"$flat"
}
# the paper's table: speed per category, Avg speed, speedup, Avg accepted length
speed_table() {
  awk -F'\t' -v cats="$cats" '
    NR == FNR { names[++n] = $2; next }
    { v[$1, $2] = $3; sp[$1, $2] = $5; acc[$1, $2] = $4 }
    END {
      nc = split(cats, c, " ")
      printf "| method |"; for (j = 1; j <= nc; j++) printf " %s |", c[j]
      print " Avg speed | Speedup | Avg accepted length |"
      printf "|---|"; for (j = 1; j <= nc; j++) printf "---:|"
      print "---:|---:|---:|"
      for (i = 1; i <= n; i++) {
        m = names[i]; printf "| %s |", m
        for (j = 1; j <= nc; j++) printf " %s |", (m SUBSEP c[j]) in v ? sprintf("%.1f", v[m, c[j]]) : "—"
        printf " %.1f | %.2f× | %.2f |\n", v[m, "Avg"], sp[m, "Avg"], acc[m, "Avg"]
      }
    }' "$dir/configs.tsv" - <<<"$flat"
}

{
  echo "# MicroSpec benchmark: Spec-Bench + HumanEval"
  echo
  sed 's/^\([a-z]*\): /- \1: /' "$dir/meta.txt"
  echo
  echo "Columns (FR-Spec's layout): MT = translation, Conv = MT-bench (8 categories), RAG, Math = GSM8K-style"
  echo "math_reasoning, QA, Summ = summarization, Code = HumanEval. Tokens/s per question = new tokens / wall time"
  echo "including prefill, averaged over the questions of a category; Avg = mean of the category values;"
  echo "Speedup = Avg speed / Avg speed of the first row. Accepted length = tokens emitted per target forward"
  echo "(1 for AR). Data: \`results.jsonl\` (per question), \`summary.jsonl\`, \`configs.tsv\` (the flags)."
  echo
  echo "## Decoding speed (tokens/s)"
  echo
  speed_table
  echo
  echo "## Mean accepted length"
  echo
  table accept
  echo
  echo "## Configurations"
  echo
  echo "| method | microspec-generate flags |"
  echo "|---|---|"
  awk -F'\t' '{ printf "| %s | `%s` |\n", $2, $6 == "" ? "(none)" : $6 }' "$dir/configs.tsv"
} >"$dir/report.md.tmp"

# W_max sweeps: series with two or more W_max values
awk -F'\t' '$3 == "dynamic" { n[$5]++ } END { for (s in n) if (n[s] >= 2) print s }' "$dir/configs.tsv" >"$dir/.series"
rm -f "$dir/wmax.png"
if [ -s "$dir/.series" ]; then
  if ! command -v gnuplot >/dev/null; then
    echo "microspec_report: gnuplot not installed (Debian: gnuplot-nox); no plot" >&2
  else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    plot_s="" plot_a="" k=0
    while IFS= read -r series; do
      k=$((k + 1))
      # W_max, Avg tokens/s, Avg accepted length, sorted by W_max
      awk -F'\t' -v s="$series" 'NR == FNR { if ($3 == "dynamic" && $5 == s) w[$2] = $4; next }
                                 ($1 in w) && $2 == "Avg" { print w[$1], $3, $4 }' \
        "$dir/configs.tsv" - <<<"$flat" | sort -n >"$tmp/s$k.dat"
      label=$(sed -E 's/--draft-kind //; s/--vocab dynamic//; s/  +/ /g; s/^ //; s/ $//' <<<"$series")
      label=${label//\'/}; label=${label//_/\\\\_}
      plot_s+="${plot_s:+, }'$tmp/s$k.dat' using 1:2 with linespoints lw 2 pt 7 title '${label:-dynamic}'"
      plot_a+="${plot_a:+, }'$tmp/s$k.dat' using 1:3 with linespoints lw 2 pt 7 title '${label:-dynamic}'"
    done <"$dir/.series"
    ar=$(awk -F'\t' 'NR == 1 { first = $1 } $1 == first && $2 == "Avg" { print $3; exit }' <<<"$flat")
    term=png
    gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo && term=pngcairo
    gnuplot <<EOF
set terminal $term size 1200,500 $([ "$term" = pngcairo ] && echo "font 'sans,10'")
set output '$dir/wmax.png'
set multiplot layout 1,2 title 'Dynamic draft vocabulary: W_{max} sweep (Avg over categories)'
set logscale x 2
set grid
set key bottom right
set xlabel 'W_{max}'
set ylabel 'tokens/s (log scale)'
set logscale y
set key top left
set title 'speed'
plot $plot_s, $ar with lines dt 2 lc rgb 'black' title 'first row (AR)'
unset logscale y
set key bottom right
set ylabel 'mean accepted length (tokens / target forward)'
set title 'accepted length'
plot $plot_a
unset multiplot
EOF
    echo "microspec_report: wrote $dir/wmax.png" >&2
    {
      echo
      echo "## Speed and accepted length vs W_max"
      echo
      echo "![W_max sweep](wmax.png)"
    } >>"$dir/report.md.tmp"
  fi
fi
rm -f "$dir/.series"
mv "$dir/report.md.tmp" "$dir/report.md"
echo "microspec_report: wrote $dir/report.md" >&2
