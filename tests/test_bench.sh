#!/usr/bin/env bash
# test_bench.sh BUILD_DIR SHARED_DIR — the reduced benchmark run
# (tools/bench/microspec_bench.sh + tools/bench/microspec_report.sh) on stories260K:
# 2 questions per category, 24 new tokens per turn, MT-bench with both turns,
# the configurations every table and figure needs: AR, dynamic W_max 32 and
# 128 (and 128 with the n-gram source merged: the accepted tokens' split by
# source), static K=64, an ablation row (indexed LM head), the two-node cluster
# (sync) and, on a machine without a GPU, a GPU row that must be reported as
# skipped. Checks consistency, not numbers: every table has every row and
# column, the cells parse as numbers, the first row (AR) has speedup 1.00 and
# accepted length 1.00, results.jsonl has a line per question × configuration
# and the summary agrees with it, second turns are counted under Conv, each
# figure is a real PNG of plausible size and its gnuplot script has a title,
# axis labels and a legend, and every image link resolves. Exit 77 without
# ../shared. BENCH_SMALL=1 (sanitizer builds): 1 question, 8 tokens, a small tree.
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

per_cat=2 per_he=3 n_tok=24 tree=""
# sanitizer builds: the same checks on a smaller run (fewer prompts and tokens, a small tree)
if [ -n "${BENCH_SMALL:-}" ]; then per_cat=1 per_he=2 n_tok=8 tree="--tree-k 4 --tree-depth 2 --tree-total 8"; fi
gen_help=$("$build/tools/microspec-generate" --help 2>&1)
has() { grep -q -- "$1[ ,=]" <<<"$gen_help"; }
no_gpu=0; (nvidia-smi -L 2>/dev/null || true) | grep -q '^GPU' || no_gpu=1

"$build/tools/convert-llama2c" "$shared/models/stories260k/stories260K.bin" "$shared/models/stories260k/tok512.bin" \
  "$work/model" >/dev/null 2>&1 || { echo "FAIL: convert-llama2c"; exit 1; }
"$build/tools/microspec-freqlist" --tokenizer "$work/model" --k 64 --out "$work/static-64.txt" \
  "$shared/corpus/tinyshakespeare.txt" >/dev/null 2>&1 || { echo "FAIL: microspec-freqlist"; exit 1; }
# whole trees every round (--draft-policy all): the rows compare vocabulary
# modes on the same trees, and every speculative row must have per-round times
ls4="--draft-kind layerskip --draft-layers 4 $tree --draft-policy all"
cat >"$work/configs.txt" <<EOC
# name|flags|placement
AR|
dynamic W_max=32|$ls4 --vocab dynamic --w-max 32
dynamic W_max=128 +ngram|$ls4 --vocab dynamic --w-max 128 --draft-kind layerskip+ngram
dynamic W_max=128|$ls4 --vocab dynamic --w-max 128
static K=64|$ls4 --vocab static --vocab-list $work/static-64.txt
dynamic W_max=128 indexed|$ls4 --vocab dynamic --w-max 128 --lm-head indexed
cluster sync W_max=128|$ls4 --vocab dynamic --w-max 128|placement=cluster pipeline=sync threads=1:2
EOC
[ $no_gpu = 1 ] && echo "GPU dynamic|$ls4 --vocab dynamic --w-max 128|device=cuda" >>"$work/configs.txt"
# the configurations that must have run, and those that must be reported as skipped
ran=(AR "dynamic W_max=32" "dynamic W_max=128" "static K=64" "cluster sync W_max=128" "dynamic W_max=128 +ngram")
skipped=()
if has --lm-head; then ran+=("dynamic W_max=128 indexed"); else skipped+=("dynamic W_max=128 indexed"); fi
[ $no_gpu = 1 ] && skipped+=("GPU dynamic")
n_cfg=${#ran[@]}

out=$work/out
MS_BUILD_DIR=$build MS_SHARED_DIR=$shared "$src/tools/bench/microspec_bench.sh" --out "$out" --configs "$work/configs.txt" \
  --model "$work/model" --max-chars 600 --per-category "$per_cat" --humaneval "$per_he" --max-new-sb "$n_tok" --max-new-he "$n_tok" \
  --turns 2 2>"$work/err"
rc=$?
check $rc "microspec_bench.sh exited $rc: $(tail -5 "$work/err")"
grep -q '\[##############################\]' "$work/err"; check $? "no complete progress bar on stderr"
for f in results.jsonl summary.jsonl configs.tsv meta.txt report.md; do
  [ -s "$out/$f" ]; check $? "$f missing or empty"
done
[ $fail = 0 ] || exit 1
# threads=T:D places the cluster's nodes: target.threads = T, draft.threads = D
cfg=$(cat "$out"/logs/*-cluster.cfg 2>/dev/null)
grep -qE '^target = \{.* threads = 1;' <<<"$cfg" && grep -qE '^draft = \{.* threads = 2;' <<<"$cfg"
check $? "threads=1:2 did not reach the cluster config: $cfg"
printf 'x|--chain|threads=1:1\n' >"$work/bad.txt"
MS_BUILD_DIR=$build "$src/tools/bench/microspec_bench.sh" --out "$work/bad" --configs "$work/bad.txt" --model "$work/model" \
  2>"$work/bad.err" >/dev/null
[ $? != 0 ] && grep -q "threads= needs placement=cluster" "$work/bad.err"
check $? "threads= without placement=cluster not refused: $(tail -2 "$work/bad.err")"

# results: (6 Spec-Bench categories × per_cat + per_he HumanEval) questions × the configurations that ran,
# no warm-up lines
n=$(wc -l <"$out/results.jsonl")
want=$(((6 * per_cat + per_he) * n_cfg))
[ "$n" = "$want" ]; check $? "results.jsonl has $n lines, want $want"
for name in "${ran[@]}"; do
  for c in MT Conv RAG Math QA Summ Code; do
    k=$(grep -cF "\"config\": \"$name\", \"dataset\": \"$([ $c = Code ] && echo human_eval || echo spec_bench)\", \"category\": \"$c\"" "$out/results.jsonl")
    w=$per_cat; [ $c = Code ] && w=$per_he
    [ "$k" = "$w" ]; check $? "'$name' × $c: $k result lines, want $w"
    grep -qF "{\"config\": \"$name\", \"category\": \"$c\"," "$out/summary.jsonl"; check $? "summary lacks '$name' × $c"
  done
done
for name in "${skipped[@]}"; do
  ! grep -qF "\"config\": \"$name\"" "$out/results.jsonl" "$out/summary.jsonl"; check $? "skipped '$name' has results"
done
# the summary's tokens/s = the mean of the per-question values; second turns only under Conv
bad=$(python3 - "$out/results.jsonl" "$out/summary.jsonl" <<'PY'
import json, sys
res = [json.loads(l) for l in open(sys.argv[1])]
summ = [json.loads(l) for l in open(sys.argv[2])]
for s in summ:
    if s["category"] == "Avg":
        continue
    qs = [r for r in res if r["config"] == s["config"] and r["category"] == s["category"]]
    tps = sum(r["tokens_per_s"] for r in qs) / max(1, len(qs))
    if len(qs) != s["questions"] or abs(tps - s["tokens_per_s"]) > 1e-2 * (1 + tps):
        print("summary %s × %s: %d questions / %.3f tokens/s, results say %d / %.3f" % (
            s["config"], s["category"], s["questions"], s["tokens_per_s"], len(qs), tps))
# accepted draft tokens by source add up to the accepted length; only a '+ngram' row has n-gram tokens;
# every row but llama.cpp's carries the split (the cluster's from its HTTP statistics)
for s in summ:
    ng, mo = s.get("accepted_ngram_per_round"), s.get("accepted_model_per_round")
    if ng is None or mo is None:
        print("summary %s × %s: no accepted split by source" % (s["config"], s["category"]))
        continue
    if s["category"] != "Avg" and abs(ng + mo - (s["accepted_length"] - 1)) > 1e-3:
        print("summary %s × %s: n-gram %.4f + model %.4f accepted per forward, accepted length %.4f" % (
            s["config"], s["category"], ng, mo, s["accepted_length"]))
    if ng != 0 and not s["config"].endswith("+ngram"):
        print("summary %s × %s: %.4f n-gram tokens per forward without the n-gram source" % (s["config"], s["category"], ng))
for r in res:
    if r["turns"] != len(r["per_turn"]) or r["new_tokens"] != sum(t["new_tokens"] for t in r["per_turn"]):
        print("result %s %s: turns do not add up" % (r["config"], r["question_id"]))
    if r["turns"] > 1 and r["category"] != "Conv":
        print("result %s %s: %d turns outside Conv" % (r["config"], r["question_id"], r["turns"]))
PY
)
[ -z "$bad" ]; check $? "summary / results inconsistent: $bad"
# --repeat's best-of-passes statistic, on this run's results seen as two passes (the second at half
# the first row's speed): each question's best pass averaged, never below the mean; none for one pass
sed -n "/^cat >\"\$work\/bench.py\" <<'PY'\$/,/^PY\$/p" "$src/tools/bench/microspec_bench.sh" | sed '1d;$d' >"$work/bench.py"
mkdir -p "$work/two"
cp "$out/configs.tsv" "$out/meta.txt" "$work/two/"
bad=$(python3 - "$out" "$work/two" "$work/bench.py" <<'PY'
import json, subprocess, sys
out, two, py = sys.argv[1:4]
res = [json.loads(l) for l in open(out + "/results.jsonl")]
first = res[0]["config"]
with open(two + "/results.jsonl", "w") as f:
    for r in res:
        for p in (1, 2):
            q = dict(r, **{"pass": p})
            if p == 2 and r["config"] == first:
                q["tokens_per_s"] = r["tokens_per_s"] / 2
            f.write(json.dumps(q) + "\n")
subprocess.run(["python3", py, "summarize", two + "/results.jsonl", two + "/configs.tsv", two + "/summary.jsonl"],
               check=True)
one = {(s["config"], s["category"]): s for s in map(json.loads, open(out + "/summary.jsonl"))}
for s in map(json.loads, open(two + "/summary.jsonl")):
    o, b, m = one[(s["config"], s["category"])], s.get("tokens_per_s_best"), s["tokens_per_s"]
    if o.get("tokens_per_s_best") is not None:
        print("%s × %s: a best-of-passes figure from one pass" % (s["config"], s["category"]))
    if b is None or b < m - 2e-3 * (1 + m):  # both rounded to 3 decimals: an absolute 1e-3 is not enough
        print("%s × %s: best %s below the mean %s" % (s["config"], s["category"], b, m))
    elif abs(b - o["tokens_per_s"]) > 2e-3 * (1 + b):
        print("%s × %s: best %s, the faster pass says %s" % (s["config"], s["category"], b, o["tokens_per_s"]))
    want = 0.75 * o["tokens_per_s"] if s["config"] == first else o["tokens_per_s"]
    if abs(m - want) > 2e-3 * (1 + m):
        print("%s × %s: mean %s, want %s" % (s["config"], s["category"], m, want))
PY
)
[ -z "$bad" ]; check $? "best of passes wrong: $bad"
if MS_SHARED_DIR=$shared "$src/tools/bench/microspec_report.sh" "$work/two" >/dev/null 2>&1; then
  grep -qF "each question's best pass" "$work/two/report.md" &&
    grep -qE "^\| dynamic W_max=128 \| [0-9.]+ / [0-9.]+ \|" "$work/two/report.md"
  check $? "two-pass report: no best-of-passes table with a row per configuration"
  ! grep -qF "each question's best pass" "$out/report.md"; check $? "a one-pass report shows a best-of-passes table"
else
  check 1 "microspec_report.sh failed on the two-pass summary"
fi
# the cluster always runs second turns; single-process runs when microspec-generate has --turns
for name in "cluster sync W_max=128" $(has --turns && echo AR); do
  t2=$(grep -F "{\"config\": \"$name\", \"category\": \"Conv\"," "$out/summary.jsonl" | sed -nE 's/.*"second_turns": ([0-9]+).*/\1/p')
  [ "${t2:-0}" -ge 1 ]; check $? "'$name': no second turn counted under Conv"
done

# the tables: every row and column, numbers in every cell
md=$out/report.md
hdr_speed='| method | MT | Conv | RAG | Math | QA | Summ | Code | Avg speed | Speedup | Avg accepted length |'
hdr_acc='| method | MT | Conv | RAG | Math | QA | Summ | Code | Avg |'
hdr_abl='| method | vocabulary | window stream | LM head | Avg speed | Speedup | Avg accepted length | mean active vocabulary | coverage |'
hdr_pl='| method | placement | pipeline | device | Avg speed | Speedup | Avg accepted length | draft ms / round | verify ms / round |'
for h in "$hdr_speed" "$hdr_acc" "$hdr_pl"; do grep -qxF "$h" "$md"; check $? "table header missing: $h"; done
# section ROW-PREFIX HEADING: the rows of the table under HEADING starting with ROW-PREFIX
section() { awk -v h="$2" -v p="$1" 'index($0, "## ") == 1 { on = ($0 == h) } on && index($0, p) == 1' "$md"; }
numeric() { # numeric ROW FIRST LAST: cells FIRST..LAST are numbers
  awk -F'|' -v a="$2" -v b="$3" '{ for (i = a; i <= b; i++) { v = $i; gsub(/[ ×]/, "", v); if (v !~ /^[0-9]+(\.[0-9]+)?$/) exit 1 } }' <<<"$1"
}
for name in "${ran[@]}"; do
  sp=$(section "| $name |" "## Decoding speed (tokens/s)") ac=$(section "| $name |" "## Mean accepted length")
  [ "$(grep -c . <<<"$sp")" = 1 ] && [ "$(grep -c . <<<"$ac")" = 1 ]; check $? "row '$name': want one per table, got: $sp / $ac"
  numeric "$sp" 3 12 && [ "$(awk -F'|' '{ print NF }' <<<"$sp")" = 13 ]
  check $? "speed row '$name' does not have 10 numeric cells: $sp"
  numeric "$ac" 3 10 && [ "$(awk -F'|' '{ print NF }' <<<"$ac")" = 11 ]
  check $? "accepted-length row '$name' does not have 8 numeric cells: $ac"
  if [ "$name" = AR ]; then
    awk -F'|' '{ s = $11; a = $12; gsub(/[ ×]/, "", s); gsub(/ /, "", a); exit !(s == "1.00" && a == "1.00") }' <<<"$sp"
    check $? "AR speedup / accepted length not 1.00: $sp"
    awk -F'|' '{ for (i = 3; i <= 10; i++) { v = $i; gsub(/ /, "", v); if (v != "1.00") exit 1 } }' <<<"$ac"
    check $? "AR accepted length not 1.00 in every category: $ac"
  else
    awk -F'|' '{ a = $12 + 0; exit !(a >= 1.0) }' <<<"$sp"; check $? "'$name' accepted length below 1: $sp"
    row=$(section "| $name |" "## Draft vocabulary and cost per round")
    [ "$(grep -c . <<<"$row")" = 1 ] && numeric "$row" 4 6; check $? "vocabulary row '$name' missing or not numeric: $row"
  fi
done
for name in "${skipped[@]}"; do
  ! grep -qF "| $name |" <(section "| " "## Decoding speed (tokens/s)"); check $? "skipped '$name' in the speed table"
  grep -qE "^- $name: skipped: " "$md"; check $? "skipped '$name' not listed as skipped"
done
[ $no_gpu = 0 ] || grep -qxF -- "- GPU dynamic: skipped: no GPU" "$md"; check $? "no 'skipped: no GPU' line"
# ablation: the reference row (both streams, gathered) and, when it ran, the indexed row
if has --lm-head; then
  grep -qxF "$hdr_abl" "$md"; check $? "ablation table header missing"
  for name in "dynamic W_max=128" "dynamic W_max=128 indexed"; do
    row=$(section "| $name |" "## Ablation: window streams and draft LM head")
    numeric "$row" 6 10; check $? "ablation row '$name' missing or not numeric: $row"
  done
  grep -qF "| dynamic W_max=128 indexed | dynamic | both | indexed |" "$md"; check $? "ablation row lacks 'indexed'"
fi
# placement: the cluster row and its single-process twin, numbers everywhere
for name in "dynamic W_max=128" "cluster sync W_max=128"; do
  row=$(section "| $name |" "## Placement: single process vs two-node cluster, sync vs overlap, CPU vs GPU")
  [ "$(grep -c . <<<"$row")" = 1 ] && numeric "$row" 6 8; check $? "placement row '$name' missing or not numeric: $row"
done
row=$(section "| cluster sync W_max=128 |" "## Placement: single process vs two-node cluster, sync vs overlap, CPU vs GPU")
grep -qF "| cluster sync W_max=128 | cluster | sync | cpu |" <<<"$row"; check $? "cluster row mislabelled: $row"
numeric "$row" 9 10; check $? "cluster row lacks draft / verify ms per round: $row"
for k in machine date commit command; do grep -q "^- $k: " "$md"; check $? "report header lacks $k"; done
# by source: a row per speculative configuration, "n-gram / model" numbers in every cell
for name in "dynamic W_max=128 +ngram" "cluster sync W_max=128"; do
  row=$(section "| $name |" "## Accepted draft tokens per target forward, by source" | head -1)
  cells=${row#"| $name |"}
  [ "$cells" != "$row" ] && grep -qE '^( [0-9.]+ / [0-9.]+ \|){8}$' <<<"$cells"; check $? "by-source row '$name' missing or not numeric: $row"
done
! section "| AR |" "## Accepted draft tokens per target forward, by source" | grep -q .; check $? "AR in the by-source table"

# the figures: real PNGs; their scripts have a title, axis labels and a legend; every image link resolves
if command -v gnuplot >/dev/null; then
  for p in wmax draft_time coverage; do
    grep -qE "^!\[[^]]*\]\($p\.png\)$" "$md"; check $? "report does not show $p.png"
    info=$("$build/tests/png_info" "$out/$p.png" 600 300); check $? "$p.png is not a real PNG of at least 600x300"
    bytes=$(stat -c %s "$out/$p.png"); [ "$bytes" -gt 8000 ]; check $? "$p.png has only $bytes bytes"
    gp=$out/plots/$p.gp
    grep -q "title '" "$gp" && grep -q "^set xlabel '" "$gp" && grep -q "^set ylabel '" "$gp" && grep -qE "^plot .* title '" "$gp"
    check $? "$p.gp lacks a title, an axis label or a legend"
    echo "$p.png: $info"
  done
  grep -qF "'draft backbone'" "$out/plots/draft_time.gp" && grep -qF "'vocabulary update'" "$out/plots/draft_time.gp"
  check $? "draft_time plot lacks the backbone / vocabulary-update series"
  grep -qF 'static top-K' "$out/plots/coverage.gp" && grep -qF 'dynamic window' "$out/plots/coverage.gp"
  check $? "coverage plot lacks the static or the dynamic series"
  # the draft-time data: one bar per timed configuration, the cluster among them
  grep -qF '"cluster sync W_max=128"' "$out/plots/draft_time.dat"; check $? "draft_time.dat lacks the cluster row"
else
  echo "gnuplot not installed: PNG sub-checks skipped"
fi
while IFS= read -r link; do
  [ -f "$out/$link" ]; check $? "report links $link, which does not exist"
done < <(sed -nE 's/^!\[[^]]*\]\(([^)]*)\)$/\1/p' "$md")
if [ -f "$src/results/coverage/coverage.md" ]; then
  grep -q '^## Model-free coverage study' "$md" && grep -qF '(../' "$md"
  check $? "the coverage study is not included by relative path"
fi
# losslessness, checked by the driver: every greedy single-process row compared with AR, none differing
[ -f "$out/lossless.tsv" ]; check $? "the driver wrote no lossless.tsv"
awk -F'\t' 'NR > 1 && $3 > 0 { n++ } NR > 1 && $4 != "-" && $4 > 0 { bad++ } END { exit !(n >= 3 && bad == 0) }' \
  "$out/lossless.tsv" 2>/dev/null
check $? "lossless.tsv: fewer than 3 compared rows, or a speculative row differs from AR"
grep -q '^\*\*Losslessness\*\*.*all identical' "$md"; check $? "the report does not state the losslessness check"

# placement=llama, against a stand-in llama-server (llama.cpp is not built for the tests): it must be fed
# the first row's prompt ids turn by turn, its timings must become the row's, and its different text must
# be reported without failing the run; without llama-server the row is reported as skipped
mkdir -p "$work/fakellama"
cat >"$work/fakellama/llama-server" <<'EOP'
#!/usr/bin/env python3
import http.server, json, sys
port, log = int(sys.argv[sys.argv.index("--port") + 1]), sys.argv[0] + ".requests"
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def reply(self, obj):
        b = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        self.reply({"status": "ok"})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        open(log, "a").write(json.dumps(body["prompt"]) + "\n")
        self.reply({"tokens": [7, 7, 7], "content": "x", "stop_type": "limit",
                    "timings": {"prompt_n": len(body["prompt"]), "prompt_ms": 10.0, "predicted_n": 3,
                                "predicted_ms": 30.0, "draft_n": 4, "draft_n_accepted": 1}})
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
EOP
chmod +x "$work/fakellama/llama-server"
printf 'AR|\nllama stand-in|-t 2 -td 2|placement=llama\n' >"$work/llama.txt"
LLAMA_BIN=$work/fakellama MS_BUILD_DIR=$build MS_SHARED_DIR=$shared "$src/tools/bench/microspec_bench.sh" \
  --out "$work/ll" --configs "$work/llama.txt" --model "$work/model" --max-chars 600 --per-category 1 \
  --max-new-sb 8 --max-new-he 8 --turns 2 --no-report 2>"$work/ll.err"
check $? "a run with a placement=llama row failed: $(tail -3 "$work/ll.err")"
python3 - "$work/ll" "$work/fakellama/llama-server.requests" <<'EOP'
import json, sys
d, req = sys.argv[1], [json.loads(l) for l in open(sys.argv[2])]
ar = [json.loads(l)["prompt_ids"] for f in ("sb", "he") for l in open("%s/logs/ids-1-%s.jsonl" % (d, f))]
assert req == ar, "the stand-in got %d prompts, not the first row's %d prompt ids in order" % (len(req), len(ar))
rows = [json.loads(l) for l in open(d + "/results.jsonl") if json.loads(l)["config"] == "llama stand-in"]
assert rows and all(r["new_tokens"] == 3 * r["turns"] and abs(r["wall_s"] - 0.04 * r["turns"]) < 1e-9 and
                    r["rounds"] == 2 * r["turns"] for r in rows), "the stand-in's timings are not the row's"
ll = [l.split("\t") for l in open(d + "/lossless.tsv") if l.startswith("llama stand-in")]
assert ll and all(int(r[2]) > 0 and r[2] == r[3] and r[4].startswith("llama.cpp, not counted") for r in ll), ll
EOP
check $? "placement=llama: prompts, timings or the text comparison are wrong"
printf 'AR|\nllama missing|-t 2|placement=llama\n' >"$work/llama2.txt"
LLAMA_BIN=$work/none MS_BUILD_DIR=$build MS_SHARED_DIR=$shared "$src/tools/bench/microspec_bench.sh" \
  --out "$work/ll2" --configs "$work/llama2.txt" --model "$work/model" --max-chars 600 --per-category 1 \
  --max-new-sb 4 --max-new-he 4 --turns 1 --no-report 2>"$work/ll2.err"
check $? "a run with a missing llama-server failed: $(tail -3 "$work/ll2.err")"
grep -q $'^llama missing\tskipped: no .*llama-server' "$work/ll2/skipped.tsv"
check $? "a placement=llama row without llama-server is not reported as skipped"

[ $fail = 0 ] && echo "bench_reduced: ok ($(sed -n 's/^runtime: //p' "$out/meta.txt") of generation)"
exit $fail
