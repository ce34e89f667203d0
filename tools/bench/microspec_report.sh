#!/usr/bin/env bash
# microspec_report.sh DIR [--coverage COVDIR] — renders what
# tools/bench/microspec_bench.sh wrote in DIR (summary.jsonl, configs.tsv,
# meta.txt, skipped.tsv) as one document, DIR/report.md:
#   - the paper's layout (rows = methods; columns MT Conv RAG Math QA Summ
#     Code, then Avg speed, speedup over the first configuration and Avg
#     accepted length), and accepted length per category;
#   - draft vocabulary and cost per round (mean/max active vocabulary,
#     coverage, draft backbone / head / vocabulary update and verify ms);
#   - the ablation table: configurations that differ only in the window's
#     stream (--vocab-stream both|context|extension) or the draft LM head
#     (--lm-head gathered|indexed);
#   - the placement table: single process vs the two-node cluster, sync vs
#     overlap, CPU vs GPU;
#   - plots (gnuplot, PNG): wmax.png (tokens/s and accepted length against
#     W_max, one line per sweep), draft_time.png (draft time per round by
#     method, stacked backbone / head / vocabulary update), coverage.png
#     (coverage against vocabulary size: static top-K vs the dynamic window
#     at each W_max; FR-Spec/MicroSpec figure 1b);
#   - the model-free coverage study (COVDIR, default results/coverage:
#     coverage.md's tables and PNGs, linked by relative path).
# Configurations that were skipped (no GPU, a flag the binary lacks) are
# listed as skipped, never as run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") echo "usage: microspec_report.sh DIR [--coverage COVDIR] (see --help)" >&2; exit 2 ;;
  -*) echo "microspec_report: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
dir=$1
shift
cov=$root/results/coverage
while [ $# -gt 0 ]; do
  case $1 in
    --coverage) cov=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "microspec_report: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for f in summary.jsonl configs.tsv meta.txt; do
  [ -r "$dir/$f" ] || { echo "microspec_report: $dir/$f missing (run tools/bench/microspec_bench.sh first)" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "microspec_report: python3 not found" >&2; exit 1; }
gnuplot=""
if command -v gnuplot >/dev/null; then
  gnuplot=gnuplot
else
  echo "microspec_report: gnuplot not installed (Debian: gnuplot-nox); no plots" >&2
fi

python3 - "$dir" "$cov" "$gnuplot" <<'PY'
import json, math, os, shutil, subprocess, sys

d, cov_dir, gnuplot = sys.argv[1], sys.argv[2], sys.argv[3]
CATS = ["MT", "Conv", "RAG", "Math", "QA", "Summ", "Code"]

# configs.tsv: index, name, vocab, W_max, series, flags, placement, pipeline, device, static K, stream, LM head,
# status (older files have the first six columns only)
configs = []
for line in open(os.path.join(d, "configs.tsv"), encoding="utf-8"):
    if not line.strip():
        continue
    f = line.rstrip("\n").split("\t")
    f += [""] * (13 - len(f))
    c = dict(zip(["index", "name", "vocab", "wmax", "series", "flags", "placement", "pipeline", "device", "k",
                  "stream", "head", "status"], f))
    c["placement"] = c["placement"] or "single"
    c["pipeline"] = c["pipeline"] or "—"
    c["device"] = c["device"] or "cpu"
    c["status"] = c["status"] or "run"
    c["stream"] = c["stream"] or ("both" if c["vocab"] == "dynamic" else "—")
    c["head"] = c["head"] or ("gathered" if c["vocab"] in ("static", "dynamic") else "—")
    configs.append(c)
summ = {}
for line in open(os.path.join(d, "summary.jsonl"), encoding="utf-8"):
    if line.strip():
        s = json.loads(line)
        summ[(s["config"], s["category"])] = s
ran = [c for c in configs if c["status"] == "run" and (c["name"], "Avg") in summ]
for c in configs:
    if c["status"] == "run" and (c["name"], "Avg") not in summ:
        c["status"] = "skipped: no result (every prompt too long for the context?)"
skipped = [c for c in configs if c["status"] != "run"]
meta = [l.rstrip("\n") for l in open(os.path.join(d, "meta.txt"), encoding="utf-8") if l.strip()]

def avg(c, key):
    return summ[(c["name"], "Avg")].get(key)

def fmt(v, spec, none="—"):
    return none if v is None else spec % v

def local_cpu(c):
    return c["placement"] == "single" and c["device"] == "cpu"

def skipped_lines(cs):
    return ["- %s: %s" % (c["name"], c["status"]) for c in cs]

def strip_flags(flags, names):
    w, out, i = flags.split(), [], 0
    while i < len(w):
        if w[i] in names:
            i += 2
            continue
        out.append(w[i])
        i += 1
    return " ".join(out)

md = []
P = md.append
P("# MicroSpec benchmark: Spec-Bench + HumanEval")
P("")
for l in meta:
    k, _, v = l.partition(": ")
    P("- %s: %s" % (k, v))
P("")
P("Every table and figure below comes from this run (the machine, date, commit and command above), except")
P("the model-free coverage study at the end, which carries its own.")
P("")
P("Columns (FR-Spec's layout): MT = translation, Conv = MT-bench (8 categories; with both turns, a question's")
P("tokens and time are summed over its turns), RAG, Math = GSM8K-style math_reasoning, QA, Summ = summarization,")
P("Code = HumanEval. Tokens/s per question = new tokens / wall time including prefill, averaged over the")
P("questions of a category; Avg = mean of the category values; Speedup = Avg speed / Avg speed of the first")
P("row. Accepted length = tokens emitted per target forward (1 for AR). Data: `results.jsonl` (per question),")
P("`summary.jsonl`, `configs.tsv` (the flags and placement).")
P("")
if skipped:
    P("Skipped configurations (not run; no numbers below):")
    P("")
    md.extend(skipped_lines(skipped))
    P("")

lossless_path = os.path.join(d, "lossless.tsv")
if os.path.exists(lossless_path):
    rows = [l.rstrip("\n").split("\t") for l in open(lossless_path, encoding="utf-8")][1:]
    llama = {c["name"] for c in configs if c["placement"] == "llama"}
    other = [r for r in rows if r[0] in llama]  # another engine: reported, not a failure
    rows = [r for r in rows if r not in other]
    checked = [r for r in rows if r[2] != "0"]
    n_bad = sum(int(r[3]) for r in checked)
    P("**Losslessness** (checked by the driver, `lossless.tsv`): %d comparisons, %s — each greedy configuration's"
      % (sum(int(r[2]) for r in checked), "all identical" if n_bad == 0 else "**%d differ**" % n_bad))
    P("token ids per question and turn against the first row's.")
    nc = sorted(set(r[0] for r in rows if r[2] == "0"))
    if nc:
        P("Not compared (no token ids, e.g. cluster rows, or sampling): %s." % ", ".join(nc))
    if other:
        P("")
        P("llama.cpp's greedy text against the first row's (the same prompt ids; its arithmetic differs, so the")
        P("two may part where two logits nearly tie; not a losslessness failure): %s." % "; ".join(
            "%s, %s: %s of %s identical" % (r[0], r[1], int(r[2]) - int(r[3]), r[2]) for r in other))
    P("")

# --- the paper's tables
P("## Decoding speed (tokens/s)")
P("")
P("| method |" + "".join(" %s |" % k for k in CATS) + " Avg speed | Speedup | Avg accepted length |")
P("|---|" + "---:|" * len(CATS) + "---:|---:|---:|")
for c in ran:
    cells = "".join(" %s |" % fmt(summ[(c["name"], k)]["tokens_per_s"] if (c["name"], k) in summ else None, "%.1f")
                    for k in CATS)
    P("| %s |%s %.1f | %.2f× | %.2f |" % (c["name"], cells, avg(c, "tokens_per_s"), avg(c, "speedup"),
                                         avg(c, "accepted_length")))
P("")
# --repeat runs: per category, the speedup over the first row from the mean of the passes (the table above)
# and from each question's best pass; where they disagree on the side of 1.0, the run cannot tell
if ran and all(summ.get((ran[0]["name"], k), {}).get("tokens_per_s_best") for k in CATS if (ran[0]["name"], k) in summ):
    P("Speedup over the first row per category: mean of the passes / each question's best pass (a run on a")
    P("shared machine is only ever slowed, so where the two disagree on the side of 1.0 the difference is noise).")
    P("")
    P("| method |" + "".join(" %s |" % k for k in CATS) + " geomean |")
    P("|---|" + "---:|" * len(CATS) + "---:|")
    for c in ran[1:]:
        cells, gm, gb, n = "", 0.0, 0.0, 0
        for k in CATS:
            a, b = summ.get((c["name"], k)), summ.get((ran[0]["name"], k))
            if not a or not b or not a.get("tokens_per_s_best"):
                cells += " — |"
                continue
            r, rb = a["tokens_per_s"] / b["tokens_per_s"], a["tokens_per_s_best"] / b["tokens_per_s_best"]
            cells += " %.2f / %.2f |" % (r, rb)
            gm, gb, n = gm + math.log(r), gb + math.log(rb), n + 1
        P("| %s |%s %s |" % (c["name"], cells, "%.2f / %.2f" % (math.exp(gm / n), math.exp(gb / n)) if n else "—"))
    P("")
P("## Mean accepted length")
P("")
P("| method |" + "".join(" %s |" % k for k in CATS) + " Avg |")
P("|---|" + "---:|" * len(CATS) + "---:|")
for c in ran:
    cells = "".join(" %s |" % fmt(summ[(c["name"], k)]["accepted_length"] if (c["name"], k) in summ else None, "%.2f")
                    for k in CATS)
    P("| %s |%s %.2f |" % (c["name"], cells, avg(c, "accepted_length")))
P("")

# --- accepted tokens by source, and the rounds the cost policy kept plain
def cell(c, k, keys, spec):
    s = summ.get((c["name"], k))
    vs = [s.get(key) if s else None for key in keys]
    return " / ".join(fmt(v, spec) for v in vs)
by_src = [c for c in ran if c["placement"] != "llama" and (avg(c, "accepted_model_per_round") or 0) +
          (avg(c, "accepted_ngram_per_round") or 0) + (avg(c, "skipped_rounds_per_round") or 0) > 0]
if by_src:
    P("## Accepted draft tokens per target forward, by source")
    P("")
    P("n-gram / model alone: accepted draft tokens per target forward that the n-gram source proposed (the model")
    P("may have proposed them too) and that only the draft model proposed (— where the statistics carry no")
    P("split). Then the share of target forwards drafted without the draft model (the cost policy's gate or")
    P("the n-gram source first) / verified as a plain decode step (the cost policy pruned the whole tree).")
    P("")
    for title, keys, spec in (("accepted per forward: n-gram / model alone",
                               ("accepted_ngram_per_round", "accepted_model_per_round"), "%.2f"),
                              ("rounds without the model / decoded plainly",
                               ("skipped_rounds_per_round", "plain_rounds_per_round"), "%.2f")):
        P("| %s |" % title + "".join(" %s |" % k for k in CATS) + " Avg |")
        P("|---|" + "---:|" * len(CATS) + "---:|")
        for c in by_src:
            P("| %s |%s %s |" % (c["name"], "".join(" %s |" % cell(c, k, keys, spec) for k in CATS),
                                 cell(c, "Avg", keys, spec)))
        P("")

# --- draft vocabulary and cost per round
spec = [c for c in ran if c["vocab"] not in ("—", "")]
P("## Draft vocabulary and cost per round")
P("")
P("Averages over the categories. Active vocabulary = draft LM-head rows per speculative round (mean / max);")
P("coverage = share of emitted tokens that were in the draft's vocabulary when drafted; draft times per")
P("speculative round, verify time per target forward, in ms (— where the statistics carry no times).")
P("")
P("| method | vocabulary | mean active vocabulary | max | coverage | draft backbone ms | draft head ms | vocabulary update ms | verify ms |")
P("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for c in spec:
    P("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        c["name"], c["vocab"], fmt(avg(c, "vocab_mean"), "%.1f"), fmt(avg(c, "vocab_max"), "%d"),
        fmt(avg(c, "coverage"), "%.4f"), fmt(avg(c, "draft_backbone_ms"), "%.3f"), fmt(avg(c, "draft_head_ms"), "%.3f"),
        fmt(avg(c, "vocab_ms"), "%.4f"), fmt(avg(c, "verify_ms"), "%.3f")))
P("")

# --- ablation: groups of single-process CPU configurations equal up to --vocab-stream / --lm-head
def abl_key(c):
    return strip_flags(c["flags"], ("--vocab-stream", "--lm-head"))
groups, gorder = {}, []
for c in configs:
    if not local_cpu(c) or c["vocab"] not in ("static", "dynamic"):
        continue
    k = abl_key(c)
    if k not in groups:
        groups[k] = []
        gorder.append(k)
    groups[k].append(c)
abl = [k for k in gorder if any(c["stream"] not in ("both", "—") or c["head"] != "gathered" for c in groups[k])]
P("## Ablation: window streams and draft LM head")
P("")
P("What feeds the window (docs/architecture.md §5; microspec-generate --vocab-stream): both = MicroSpec (the prompt and its")
P("top-K_pre target ids, then C_draft + C_ver each round); context = the prompt, then the tokens emitted each")
P("round; extension = top-K_pre, then C_draft + C_ver each round. Draft LM head (--lm-head): gathered = the")
P("active rows packed into a dense matrix and one GEMM; indexed = a dot product per active id with its row read")
P("in place, no row copies. Rows grouped by configurations that differ only in these two settings.")
P("")
if not abl:
    P("No ablation configurations in this run.")
else:
    P("| method | vocabulary | window stream | LM head | Avg speed | Speedup | Avg accepted length | mean active vocabulary | coverage |")
    P("|---|---|---|---|---:|---:|---:|---:|---:|")
    for k in abl:
        for c in groups[k]:
            if c["status"] != "run":
                continue
            P("| %s | %s | %s | %s | %.1f | %.2f× | %.2f | %s | %s |" % (
                c["name"], c["vocab"], c["stream"], c["head"], avg(c, "tokens_per_s"), avg(c, "speedup"),
                avg(c, "accepted_length"), fmt(avg(c, "vocab_mean"), "%.1f"), fmt(avg(c, "coverage"), "%.4f")))
    sk = [c for k in abl for c in groups[k] if c["status"] != "run"]
    if sk:
        P("")
        md.extend(skipped_lines(sk))
P("")

# --- placement: cluster / device configurations and their single-process CPU twins
def twin_key(c):
    return strip_flags(c["flags"], ("--device",))
moved = [c for c in configs if not local_cpu(c) and c["placement"] != "llama"]
keys = {twin_key(c) for c in moved}
pl = [c for c in configs if c in moved or (local_cpu(c) and twin_key(c) in keys)]
P("## Placement: single process vs two-node cluster, sync vs overlap, CPU vs GPU")
P("")
P("single = one microspec-generate process (the draft called directly); cluster = target and draft nodes on")
P("this machine (cluster/launch.sh, ipc:// link), prompts sent over HTTP one at a time, statistics from each")
P("response's `microspec` object. sync / overlap: docs/architecture.md §6. Draft per round = backbone + head + vocabulary")
P("update per speculative round; verify per target forward (ms).")
P("")
if not pl:
    P("No placement or device configurations in this run.")
else:
    P("| method | placement | pipeline | device | Avg speed | Speedup | Avg accepted length | draft ms / round | verify ms / round |")
    P("|---|---|---|---|---:|---:|---:|---:|---:|")
    for c in pl:
        if c["status"] != "run":
            continue
        parts = [avg(c, k) for k in ("draft_backbone_ms", "draft_head_ms", "vocab_ms")]
        dr = sum(parts) if all(p is not None for p in parts) else None
        P("| %s | %s | %s | %s | %.1f | %.2f× | %.2f | %s | %s |" % (
            c["name"], c["placement"], c["pipeline"], c["device"], avg(c, "tokens_per_s"), avg(c, "speedup"),
            avg(c, "accepted_length"), fmt(dr, "%.3f"), fmt(avg(c, "verify_ms"), "%.3f")))
    sk = [c for c in pl if c["status"] != "run"]
    if sk:
        P("")
        md.extend(skipped_lines(sk))
P("")

# --- plots
# each figure: plots/NAME.gp (the gnuplot script) and plots/NAME*.dat, run from DIR, so that a figure can be
# re-rendered with `cd DIR && gnuplot plots/NAME.gp`
tmp = os.path.join(d, "plots")
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
term = "png"
if gnuplot:
    probe = subprocess.run([gnuplot, "-e", "set terminal"], capture_output=True, text=True)
    if "pngcairo" in probe.stdout + probe.stderr:
        term = "pngcairo"
def gp(script, name):
    png = os.path.join(d, name + ".png")
    if os.path.exists(png):
        os.remove(png)
    text = "set terminal %s size %s %s\nset output '%s.png'\n%s" % (
        term, script[0], "font 'sans,10'" if term == "pngcairo" else "", name, script[1])
    with open(os.path.join(tmp, name + ".gp"), "w") as f:
        f.write(text)
    if not gnuplot:
        return False
    r = subprocess.run([gnuplot, os.path.join("plots", name + ".gp")], cwd=d, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(png):
        print("microspec_report: gnuplot failed for %s: %s" % (png, r.stderr.strip()), file=sys.stderr)
        return False
    print("microspec_report: wrote %s" % png, file=sys.stderr)
    return True
def q(s):  # a gnuplot single-quoted string
    return s.replace("'", "''")

P("## Figures")
P("")
# W_max sweeps: single-process CPU dynamic series (both streams, gathered head) with two or more W_max values
sweeps = {}
for c in ran:
    if local_cpu(c) and c["vocab"] == "dynamic" and c["stream"] == "both" and c["head"] == "gathered" and c["wmax"]:
        sweeps.setdefault(c["series"], []).append(c)
sweeps = {s: cs for s, cs in sweeps.items() if len(cs) >= 2}
if sweeps:
    ps, pa = [], []
    for n, (s, cs) in enumerate(sweeps.items()):
        fn = "plots/wmax-%d.dat" % n
        with open(os.path.join(d, fn), "w") as f:
            for c in sorted(cs, key=lambda c: int(c["wmax"])):
                f.write("%s %s %s\n" % (c["wmax"], avg(c, "tokens_per_s"), avg(c, "accepted_length")))
        label = " ".join(w for w in s.replace("--draft-kind", "").replace("--vocab dynamic", "").split()) or "dynamic"
        ps.append("'%s' using 1:2 with linespoints lw 2 pt 7 title '%s'" % (fn, q(label)))
        pa.append("'%s' using 1:3 with linespoints lw 2 pt 7 title '%s'" % (fn, q(label)))
    base = ran[0]
    ok = gp(("1200,500", """set multiplot layout 1,2 title 'Dynamic draft vocabulary: W_{max} sweep (Avg over categories)'
set logscale x 2
set grid
set xlabel 'W_{max}'
set ylabel 'tokens/s (log scale)'
set logscale y
set key top left noenhanced
set title 'speed'
plot %s, %s with lines dt 2 lc rgb 'black' title '%s'
unset logscale y
set key bottom right
set ylabel 'mean accepted length (tokens / target forward)'
set title 'accepted length'
plot %s
unset multiplot
""" % (", ".join(ps), avg(base, "tokens_per_s"), q("first row: " + base["name"]), ", ".join(pa))),
            "wmax")
    if ok:
        P("### Speed and accepted length vs W_max")
        P("")
        P("![W_max sweep](wmax.png)")
        P("")
elif os.path.exists(os.path.join(d, "wmax.png")):
    os.remove(os.path.join(d, "wmax.png"))

# draft time per round by method: stacked backbone / head / vocabulary update
timed = [c for c in spec if c["status"] == "run" and all(avg(c, k) is not None for k in
                                                         ("draft_backbone_ms", "draft_head_ms", "vocab_ms"))]
untimed = [c for c in spec if c not in timed]
P("### Draft time per round by method")
P("")
if timed:
    fn = "plots/draft_time.dat"
    with open(os.path.join(d, fn), "w") as f:
        for c in timed:
            f.write('"%s" %.6f %.6f %.6f\n' % (c["name"].replace('"', "'"), avg(c, "draft_backbone_ms"),
                                               avg(c, "draft_head_ms"), avg(c, "vocab_ms")))
    h = max(500, 320 + 14 * max(len(c["name"]) for c in timed))
    w = max(900, 90 * len(timed) + 250)
    ok = gp(("%d,%d" % (w, h), """set title 'Draft time per speculative round by method (Avg over categories)'
set termoption noenhanced
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set grid ytics
set ylabel 'ms per round'
set xlabel 'configuration'
set xtics rotate by -35 left
set yrange [0:*]
set key outside top right title 'part'
plot '%s' using 2:xtic(1) title 'draft backbone', '' using 3 title 'draft LM head', '' using 4 title 'vocabulary update'
""" % fn), "draft_time")
    if ok:
        P("![draft time per round](draft_time.png)")
        P("")
    if untimed:
        P("Not in the figure (no draft times in their statistics): " + ", ".join(c["name"] for c in untimed) + ".")
        P("")
else:
    if os.path.exists(os.path.join(d, "draft_time.png")):
        os.remove(os.path.join(d, "draft_time.png"))
    P("No configuration reported draft times per round (the statistics lack draft_backbone_s/draft_head_s/vocab_s).")
    P("")

# coverage vs vocabulary size: static K, dynamic W_max (single-process CPU; both streams; gathered head)
stat = sorted([c for c in ran if local_cpu(c) and c["vocab"] == "static" and c["k"] and c["head"] == "gathered"
               and avg(c, "coverage") is not None], key=lambda c: int(c["k"]))
dyn = sorted([c for c in ran if local_cpu(c) and c["vocab"] == "dynamic" and c["stream"] == "both"
              and c["head"] == "gathered" and avg(c, "coverage") is not None], key=lambda c: int(c["wmax"]))
P("### Coverage vs draft vocabulary size")
P("")
if stat or dyn:
    plots = []
    for label, cs, x in (("static top-K (FR-Spec)", stat, "k"), ("dynamic window (MicroSpec), at W_max", dyn, "wmax")):
        if not cs:
            continue
        fn = "plots/coverage-%s.dat" % x
        with open(os.path.join(d, fn), "w") as f:
            for c in cs:
                f.write("%s %.6f %s\n" % (c[x], 100 * avg(c, "coverage"), fmt(avg(c, "vocab_mean"), "%.2f", "0")))
        plots.append("'%s' using 1:2 with linespoints lw 2 pt 7 title '%s'" % (fn, q(label)))
    ok = gp(("900,550", """set title 'Coverage vs draft vocabulary size (emitted tokens in the draft vocabulary; Avg over categories)' noenhanced
set logscale x 2
set grid
set xlabel 'vocabulary size: K (static) or W_{max} (dynamic)'
set ylabel 'coverage (%%)'
set yrange [0:100]
set key bottom right noenhanced
set offsets graph 0.05, graph 0.05, 0, 0
plot %s
""" % ", ".join(plots)), "coverage")
    if ok:
        P("![coverage vs vocabulary size](coverage.png)")
        P("")
    P("| vocabulary | size (K or W_max) | mean active vocabulary | coverage |")
    P("|---|---:|---:|---:|")
    for c in stat:
        P("| static | %s | %s | %.4f |" % (c["k"], fmt(avg(c, "vocab_mean"), "%.1f"), avg(c, "coverage")))
    for c in dyn:
        P("| dynamic | %s | %s | %.4f |" % (c["wmax"], fmt(avg(c, "vocab_mean"), "%.1f"), avg(c, "coverage")))
    P("")
else:
    if os.path.exists(os.path.join(d, "coverage.png")):
        os.remove(os.path.join(d, "coverage.png"))
    P("No static or dynamic configuration with a measured coverage in this run.")
    P("")

# --- configurations
P("## Configurations")
P("")
P("| method | flags (microspec-generate; llama-server where placement is llama) | placement | pipeline | device | status |")
P("|---|---|---|---|---|---|")
for c in configs:
    P("| %s | `%s` | %s | %s | %s | %s |" % (c["name"], c["flags"] or "(none)", c["placement"], c["pipeline"],
                                          c["device"], c["status"]))
P("")

# --- the model-free coverage study
P("## Model-free coverage study (real tokenizers, no model)")
P("")
cov_md = os.path.join(cov_dir, "coverage.md")
if os.path.exists(cov_md):
    rel = os.path.relpath(os.path.abspath(cov_dir), os.path.abspath(d))
    P("Included from [`%s`](%s) (tools/dev/coverage_report.sh); its own machine, date, commit and command follow." %
      (os.path.join(rel, "coverage.md"), os.path.join(rel, "coverage.md")))
    P("")
    lines = open(cov_md, encoding="utf-8").read().splitlines()
    for l in lines[1:] if lines and lines[0].startswith("# ") else lines:
        P("##" + l if l.startswith("## ") or l.startswith("### ") else l)
    P("")
    for png in sorted(p for p in os.listdir(cov_dir) if p.startswith("coverage") and p.endswith(".png")):
        P("![%s](%s)" % (png[:-4], os.path.join(rel, png)))
        P("")
else:
    P("Not found at `%s` (run tools/dev/coverage_report.sh)." % cov_dir)
    P("")

with open(os.path.join(d, "report.md.tmp"), "w", encoding="utf-8") as f:
    f.write("\n".join(md).rstrip("\n") + "\n")
os.replace(os.path.join(d, "report.md.tmp"), os.path.join(d, "report.md"))
PY
echo "microspec_report: wrote $dir/report.md" >&2
