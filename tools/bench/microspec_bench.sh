#!/usr/bin/env bash
# microspec_bench.sh — the benchmark driver (issue 7): runs Spec-Bench and
# HumanEval prompts through a list of configurations, following
# eagle2-frspec-notes §5: greedy, max new tokens 1024 (Spec-Bench) / 512
# (HumanEval), MT-bench questions with both turns, the first question run 3×
# untimed as warm-up, wall time incl. prefill, tokens/s per question
# (Σ_turns new tokens / Σ_turns wall time) averaged over questions. Then
# tools/bench/microspec_report.sh renders the tables and plots.
#
#   tools/bench/microspec_bench.sh [options]
#     --out DIR           results folder (default results/bench)
#     --configs FILE      configurations, one a line (see below). The first line is
#                         the baseline of the speedup (AR). Default: the stories260K
#                         list below.
#     --model DIR         target model (default: stories260K converted into
#                         $MS_BUILD_DIR/models/stories260k)
#     --per-category N    questions per category (default all of the evaluation split:
#                         Spec-Bench's last quarter per category is its training split,
#                         never run here; tools/bench/microspec_bench_prompts.c)
#     --humaneval N       HumanEval questions (default: as --per-category)
#     --max-new-sb N      max new tokens, Spec-Bench (default 1024)
#     --max-new-he N      max new tokens, HumanEval (default 512)
#     --max-chars N       cut prompts (each turn) to N bytes (default 600 for
#                         stories260K, whose context is 512 tokens; 0 = no cut)
#     --turns 1|2         2 (default, the protocol): MT-bench questions run both
#                         turns, the second conditioned on the first turn and its
#                         answer; its tokens and time count under Conv (Spec-Bench).
#                         1: first turns only.
#     --chat              render prompts through the chat template (models that have one)
#     --no-report         do not run microspec_report.sh
#     --resume            keep DIR/results.jsonl and run only the (configuration,
#                         dataset) pairs it lacks: a long run that stopped (a
#                         failed configuration, a reboot) goes on where it was,
#                         with the same options; the report covers all of it
#     --repeat N          run every configuration N times (default 1), in the
#                         listed order, then reversed, and so on (A B C, C B A,
#                         ...), so a machine that drifts (another tenant, a
#                         clock) weighs on every configuration alike; each
#                         question's lines count once per pass in the means
#
# Configuration lines: "NAME|microspec-generate flags[|key=value ...]" ('#'
# comments; @OUT@ in flags = the results folder). Keys:
#   placement=single|cluster  single (default): one microspec-generate process in
#                             batch mode. cluster: a two-node cluster on this box
#                             (cluster/launch.sh; target and draft processes over an
#                             ipc:// link) fed over HTTP, one request per turn, the
#                             statistics from each response's "microspec" object.
#                             Raw prompts go to /v1/completions, turn 2 as the text
#                             turn 1 + answer 1 + "\n\n" + turn 2 (as microspec-generate
#                             --turns does with ids); with --chat to /v1/chat/completions
#                             with the conversation [turn 1, answer 1 (stripped), turn 2].
#   placement=llama           llama.cpp, the engine users would otherwise run: llama-server
#                             (LLAMA_BIN, default the tools/build-llamacpp.sh build) started
#                             with -m MODEL -c 4096 -np 1 and the line's flags as its own
#                             (e.g. "-t 2 -tb 2" for AR; "-t 2 -tb 2 -td 2 -md DRAFT.gguf
#                             --spec-type draft-simple" or "--spec-type ngram-mod" for its
#                             speculative modes), fed per turn the very prompt token ids the
#                             first configuration read (its --ids-out; a second turn's prompt
#                             holds that configuration's first answer), greedy (temperature 0,
#                             top-k 1), no prompt cache; time = its prompt + decode timings;
#                             accepted tokens from its draft counts. Its ids are compared with
#                             the first configuration's and reported, not counted as a
#                             losslessness failure (its arithmetic differs: greedy paths may
#                             part where two logits nearly tie). Skipped when llama-server is
#                             missing.
#   pipeline=sync|overlap     the cluster's draft pipeline (docs/architecture.md §6; cluster only)
#   threads=T:D               the cluster's thread split on this box: target.threads = T,
#                             draft.threads = D (cluster only; default: both from --threads,
#                             else every core each: in sync mode they take turns)
#   device=cpu|cuda[:N]       cuda: skipped, with "skipped: no GPU" in the report, when
#                             `nvidia-smi -L` lists no GPU.
# A configuration that needs a microspec-generate flag the binary lacks (or a
# cluster key the config has no equivalent for) is skipped the same way, with
# the reason; it is never reported as run.
#
# Writes DIR/results.jsonl (a line per question and configuration: config,
# dataset, category, source_category, question_id, turns, tokens_per_s and the
# statistics summed over the turns, per-turn lines under "per_turn"),
# DIR/summary.jsonl (a line per configuration × category, and category "Avg"
# with the speedup), configs.tsv, skipped.tsv, meta.txt (machine, date,
# commit, command) and logs/. Progress on stderr.
#
# Deviations from the protocol, on stories260K: no chat template (prompts
# encoded raw, BOS first; a second turn continues the first turn's prompt and
# answer after "\n\n"), prompts cut to --max-chars.
#
# Environment: MS_BUILD_DIR (default build/release, what tools/demo.sh builds), MS_SHARED_DIR (default ../shared),
# LLAMA_BIN (llama.cpp's bin folder, for placement=llama).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${MS_BUILD_DIR:-build/release}
shared=${MS_SHARED_DIR:-../shared}
T=$build/tools
LB=${LLAMA_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/microspec/llama.cpp-0.3.36/build/bin}
out=results/bench configs="" model="" per_cat="" per_he="" max_sb=1024 max_he=512 max_chars="" chat="" report=1 turns=2 resume=0 repeat=1
argv=("$@")
die() { echo "microspec_bench: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --per-category) per_cat=$2; shift 2 ;;
    --humaneval) per_he=$2; shift 2 ;;
    --max-new-sb) max_sb=$2; shift 2 ;;
    --max-new-he) max_he=$2; shift 2 ;;
    --max-chars) max_chars=$2; shift 2 ;;
    --turns) turns=$2; shift 2 ;;
    --chat) chat=--chat; shift ;;
    --no-report) report=0; shift ;;
    --resume) resume=1; shift ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "microspec_bench: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$turns" =~ ^[12]$ ]] || die "--turns must be 1 or 2, not '$turns'"
[[ "$repeat" =~ ^[1-9][0-9]?$ ]] || die "--repeat must be a count in 1..99, not '$repeat'"
[ -z "$per_he" ] || [[ "$per_he" =~ ^[1-9][0-9]{0,3}$ ]] || die "--humaneval must be a count of questions, not '$per_he'"
for b in microspec-generate microspec-bench-prompts convert-llama2c microspec-freqlist; do
  [ -x "$T/$b" ] || die "$T/$b not found (build first, or set MS_BUILD_DIR)"
done
command -v python3 >/dev/null || die "python3 not found (tools/install-deps.sh installs it)"
sb=$shared/data/spec_bench/question.jsonl he=$shared/data/human_eval/question.jsonl
[ -r "$sb" ] && [ -r "$he" ] || die "$sb or $he missing (set MS_SHARED_DIR)"
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
build_abs=$(cd "$build" && pwd)
work=$(mktemp -d)
run_dir=""  # the cluster being measured, stopped on any exit
llama_pid="" # the llama-server being measured, stopped on any exit
cleanup() {
  [ -z "$run_dir" ] || RUN_DIR=$run_dir bash "$root/cluster/stop.sh" >/dev/null 2>&1 || true
  [ -z "$llama_pid" ] || kill "$llama_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$model" ]; then
  model=$build/models/stories260k
  src=$shared/models/stories260k
  mkdir -p "$(dirname "$model")"
  [ -f "$model/config.json" ] || "$T/convert-llama2c" "$src/stories260K.bin" "$src/tok512.bin" "$model" >/dev/null 2>&1 ||
    die "converting $src failed"
  max_chars=${max_chars:-600}
fi
max_chars=${max_chars:-0}
if [ -f "$model" ]; then model_abs=$(cd "$(dirname "$model")" && pwd)/$(basename "$model"); else model_abs=$(cd "$model" && pwd); fi

# ---------------------------------------------------------------- helpers (Python: JSON in and out)
cat >"$work/bench.py" <<'PY'
import glob, json, os, re, sys, time, urllib.error, urllib.request

def cut(text, n):
    """The first n bytes of text, cut at a UTF-8 boundary (as microspec-bench-prompts does)."""
    if n <= 0:
        return text
    return text.encode()[:n].decode(errors="ignore")

def add_turns(prompts, manifest, source, max_chars, dst):
    """Adds turns[1] (cut to max_chars) to the prompts whose source question has a second turn."""
    second = {}
    for line in open(source, encoding="utf-8"):
        if line.strip():
            q = json.loads(line)
            t = q.get("turns") or []
            if len(t) > 1 and isinstance(t[1], str):
                second[str(q.get("question_id"))] = t[1]
    man = [l.rstrip("\n").split("\t") for l in open(manifest) if l.strip()]
    n2 = 0
    with open(dst, "w", encoding="utf-8") as f:
        for m, line in zip(man, open(prompts, encoding="utf-8")):
            row = json.loads(line)
            if m[3] in second:
                row["turns"] = [row["turns"][0], cut(second[m[3]], max_chars)]
                n2 += 1
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(n2)

def post(url, body, timeout=900):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except ValueError:
            return e.code, {}

def error_of(r):
    """The message of an OpenAI- or llama-server-style error body ("" if none)."""
    e = r.get("error")
    return e.get("message", "") if isinstance(e, dict) else ""

def cluster(url, prompts, max_new, turns, chat, stats_out):
    """One stats line per turn, in microspec-generate's --stats-out format."""
    with open(stats_out, "w") as out:
        for index, line in enumerate(open(prompts, encoding="utf-8")):
            row = json.loads(line)
            conv = []
            for t, text in enumerate(row["turns"][:turns]):
                conv.append({"role": "user", "content": text})
                body = {"max_tokens": max_new, "temperature": 0}
                if chat:
                    code, r = post(url + "/v1/chat/completions", dict(body, messages=conv))
                else:  # raw, as microspec-generate --turns: turn 1 + answer 1 + "\n\n" + turn 2
                    raw = "".join(m["content"] + ("\n\n" if m["role"] == "assistant" else "") for m in conv)
                    code, r = post(url + "/v1/completions", dict(body, prompt=raw))
                m = r.get("microspec")
                if code != 200 or m is None:
                    print("cluster: prompt %d turn %d: HTTP %d %s; skipped" % (index, t + 1, code, error_of(r)),
                          file=sys.stderr)
                    break
                ch = r["choices"][0]
                answer = ch.get("text") if "text" in ch else (ch.get("message") or {}).get("content", "")
                conv.append({"role": "assistant", "content": answer if not chat else answer.strip()})
                u = r.get("usage") or {}
                s = {"index": index, "turn": t + 1, "prompt_tokens": u.get("prompt_tokens", 0),
                     "new_tokens": u.get("completion_tokens", 0), "rounds": m["rounds"],
                     "spec_rounds": m["spec_rounds"], "mean_accepted": m["mean_accepted_length"],
                     "coverage": m["coverage"], "vocab_mean": m["vocab_mean"], "vocab_max": m["vocab_max"],
                     "wall_s": m["total_ms"] / 1e3, "prefill_s": m["prefill_ms"] / 1e3,
                     "draft_backbone_s": m["draft_backbone_ms"] / 1e3, "draft_head_s": m["draft_head_ms"] / 1e3,
                     "vocab_s": m["vocab_ms"] / 1e3, "verify_s": m["verify_ms"] / 1e3,
                     "stop": m.get("stop_reason", ""), "draft_failed": m["draft_failed"]}
                s.update({k: m[k] for k in SOURCES if k in m})
                out.write(json.dumps(s) + "\n")
                out.flush()

def llama(url, ids_src, n_prompts, max_new, turns, stats_out, ids_out):
    """llama-server on the first configuration's prompt ids, one request per turn, greedy, no prompt cache:
    a stats line per turn in microspec-generate's --stats-out format and an --ids-out line. Its new tokens
    leave out a final end-of-generation token, as microspec-generate counts them; rounds = new tokens −
    accepted draft tokens (a verify emits its accepted tokens and one of its own)."""
    src = {}
    for l in open(ids_src):
        if l.strip():
            j = json.loads(l)
            src[(j["prompt"], j["turn"])] = j["prompt_ids"]
    with open(stats_out, "w") as out, open(ids_out, "w") as ids:
        for index in range(int(n_prompts)):
            for t in range(1, turns + 1):
                p = src.get((index, t))
                if p is None:  # a one-turn question, or a turn the first configuration skipped
                    break
                code, r = post(url + "/completion", {"prompt": p, "n_predict": max_new, "temperature": 0,
                                                     "top_k": 1, "cache_prompt": False, "return_tokens": True})
                tm = r.get("timings")
                if code != 200 or not isinstance(tm, dict):
                    print("llama: prompt %d turn %d: HTTP %d %s; skipped" % (index, t, code, error_of(r)), file=sys.stderr)
                    break
                new = int(tm.get("predicted_n", 0)) - (1 if r.get("stop_type") == "eos" else 0)
                acc, drafted = int(tm.get("draft_n_accepted", 0)), int(tm.get("draft_n", 0))
                rounds = max(new - acc, 1) if new > 0 else 0
                pms, dms = float(tm.get("prompt_ms", 0)), float(tm.get("predicted_ms", 0))
                s = {"index": index, "turn": t, "prompt_tokens": int(tm.get("prompt_n", len(p))), "new_tokens": new,
                     "rounds": rounds, "spec_rounds": 0, "mean_accepted": new / rounds if rounds else 0,
                     "accepted": acc, "drafted": drafted, "coverage": 0, "vocab_mean": 0, "vocab_max": 0,
                     "wall_s": (pms + dms) / 1e3, "prefill_s": pms / 1e3, "stop": r.get("stop_type", ""),
                     "draft_failed": False}
                out.write(json.dumps(s) + "\n")
                out.flush()
                ids.write(json.dumps({"prompt": index, "turn": t, "prompt_ids": p, "ids": r.get("tokens", [])}) + "\n")

TIMES = ("draft_backbone_s", "draft_head_s", "vocab_s", "verify_s")
# accepted draft tokens (and of them the n-gram source's), the rounds the cost policy verified plainly and
# those drafted without the draft model: summed over turns where every turn has them (llama.cpp: "accepted")
SOURCES = ("accepted", "accepted_ngram", "plain_rounds", "skipped_rounds")
PER_ROUND = ["accepted_ngram_per_round", "accepted_model_per_round", "plain_rounds_per_round", "skipped_rounds_per_round"]

def collect(manifest, stats, config, dataset, dst, pas="1"):
    """One result line per timed question: manifest columns + the statistics summed over its turns."""
    man = {}
    for l in open(manifest):
        if l.strip():
            i, cat, src, qid, warm = l.rstrip("\n").split("\t")
            man[int(i)] = (cat, src, qid, warm == "1")
    per_q = {}
    for l in open(stats):
        if l.strip():
            s = json.loads(l)
            per_q.setdefault(s["index"], []).append(s)
    with open(dst, "a") as out:
        for i in sorted(per_q):
            cat, src, qid, warm = man[i]
            if warm:
                continue
            ts = per_q[i]
            r = {"config": config, "dataset": dataset, "category": cat, "source_category": src, "question_id": qid,
                 "pass": int(pas), "turns": len(ts)}
            for k in ("prompt_tokens", "new_tokens", "rounds", "spec_rounds", "wall_s", "prefill_s"):
                r[k] = sum(t.get(k, 0) for t in ts)
            r["tokens_per_s"] = round(r["new_tokens"] / r["wall_s"], 3) if r["wall_s"] > 0 else 0
            r["emitted"] = sum(t["mean_accepted"] * t["rounds"] for t in ts)
            r["mean_accepted"] = r["emitted"] / r["rounds"] if r["rounds"] else 0
            sr = r["spec_rounds"]
            r["vocab_mean"] = sum(t["vocab_mean"] * t["spec_rounds"] for t in ts) / sr if sr else None
            r["vocab_max"] = max(t.get("vocab_max", 0) for t in ts)
            # coverage: the turns' shares weighted by their new tokens (the stats line gives a share only)
            nt = r["new_tokens"]
            r["coverage"] = sum(t["coverage"] * t["new_tokens"] for t in ts) / nt if sr and nt else None
            for k in TIMES + SOURCES:
                r[k] = sum(t[k] for t in ts) if all(k in t for t in ts) else None
            r["draft_failed"] = any(t.get("draft_failed") for t in ts)
            r["per_turn"] = ts
            out.write(json.dumps(r) + "\n")

CATS = ["MT", "Conv", "RAG", "Math", "QA", "Summ", "Code"]

def summarize(results, configs_tsv, dst):
    """Per configuration × category: tokens/s = mean over questions; accepted length = Σ emitted / Σ rounds;
    mean active vocabulary = per spec round; coverage = new-token weighted; times per round in ms (draft
    parts per speculative round, verify per round). "Avg" = the mean of the category values; speedup =
    Avg tokens/s over the first configuration's."""
    order = [l.split("\t")[1] for l in open(configs_tsv) if l.strip()]
    rows = {}
    for l in open(results):
        r = json.loads(l)
        rows.setdefault((r["config"], r["category"]), []).append(r)
    lines, base = [], None
    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None
    def rnd(x, n):
        return None if x is None else round(x, n)
    for c in order:
        percat = []
        for k in CATS:
            qs = rows.get((c, k))
            if not qs:
                continue
            rounds = sum(q["rounds"] for q in qs)
            sr = sum(q["spec_rounds"] for q in qs)
            nt = sum(q["new_tokens"] for q in qs)
            npass = len({q.get("pass", 1) for q in qs})  # --repeat: each question once per pass
            s = {"config": c, "category": k, "questions": len({q["question_id"] for q in qs}), "passes": npass,
                 "second_turns": sum(q["turns"] > 1 for q in qs) // npass,
                 "new_tokens": nt, "wall_s": round(sum(q["wall_s"] for q in qs), 6),
                 "tokens_per_s": round(sum(q["tokens_per_s"] for q in qs) / len(qs), 3),
                 "accepted_length": round(sum(q["emitted"] for q in qs) / rounds, 4) if rounds else 0,
                 "rounds": rounds, "spec_rounds": sr,
                 "vocab_mean": rnd(sum(q["vocab_mean"] * q["spec_rounds"] for q in qs if q["vocab_mean"] is not None) / sr, 2) if sr else None,
                 "vocab_max": max(q["vocab_max"] for q in qs),
                 "coverage": rnd(sum(q["coverage"] * q["new_tokens"] for q in qs if q["coverage"] is not None) / nt, 4) if sr and nt else None}
            # per target forward: accepted draft tokens by source; rounds without the model / verified plainly
            for k2 in ("accepted_ngram", "plain_rounds", "skipped_rounds"):
                have = rounds and all(q.get(k2) is not None for q in qs)
                s[k2 + "_per_round"] = round(sum(q[k2] for q in qs) / rounds, 4) if have else None
            have = rounds and all(q.get("accepted") is not None and q.get("accepted_ngram") is not None for q in qs)
            s["accepted_model_per_round"] = (round(sum(q["accepted"] - q["accepted_ngram"] for q in qs) / rounds, 4)
                                             if have else None)
            for k2 in TIMES:
                have = all(q[k2] is not None for q in qs)
                den = rounds if k2 == "verify_s" else sr
                s[k2.replace("_s", "_ms")] = round(sum(q[k2] for q in qs) / den * 1e3, 6) if have and den else None
            # with --repeat: each question's best pass (interference on a shared machine only slows a
            # run), averaged over the questions; the noise beside the mean, not a replacement for it
            best = {}
            for q in qs:
                best[q["question_id"]] = max(best.get(q["question_id"], 0.0), q["tokens_per_s"])
            s["tokens_per_s_best"] = round(sum(best.values()) / len(best), 3) if npass > 1 else None
            percat.append(s)
            lines.append(s)
        if not percat:
            continue
        avg = {"config": c, "category": "Avg", "categories": len(percat),
               "tokens_per_s": round(mean([s["tokens_per_s"] for s in percat]), 3)}
        if base is None:
            base = avg["tokens_per_s"]
        avg["speedup"] = round(avg["tokens_per_s"] / base, 4) if base else 0
        bests = [s["tokens_per_s_best"] for s in percat]
        avg["tokens_per_s_best"] = round(mean(bests), 3) if None not in bests else None
        avg["accepted_length"] = round(mean([s["accepted_length"] for s in percat]), 4)
        avg["vocab_mean"] = rnd(mean([s["vocab_mean"] for s in percat]), 2)
        avg["vocab_max"] = max(s["vocab_max"] for s in percat)
        avg["coverage"] = rnd(mean([s["coverage"] for s in percat]), 4)
        for k2 in [t.replace("_s", "_ms") for t in TIMES] + PER_ROUND:
            avg[k2] = rnd(mean([s[k2] for s in percat]), 6) if all(s[k2] is not None for s in percat) else None
        avg["second_turns"] = sum(s["second_turns"] for s in percat)
        lines.append(avg)
    with open(dst, "w") as f:
        for s in lines:
            f.write(json.dumps(s) + "\n")

def lossless(logs, configs_tsv, dst):
    """Greedy speculative output must be the AR output: each configuration's token ids per (prompt, turn)
    (microspec-generate --ids-out) against the first configuration's. Sampling rows (-t/--temperature > 0)
    and configurations without an ids file (cluster runs) are listed as not checked."""
    cfg = [l.rstrip("\n").split("\t") for l in open(configs_tsv) if l.strip()]
    def ids_of(path):
        r = {}
        for l in open(path):
            if l.strip():
                j = json.loads(l)
                r[(j["prompt"], j["turn"])] = j["ids"]
        return r
    bad = 0
    with open(dst, "w") as f:
        f.write("config\tdataset\tcompared\tdiffering\tfirst differing (prompt, turn)\n")
        for c in cfg[1:]:
            i, name, flags, place, status = c[0], c[1], " " + c[5] + " ", c[6], c[12]
            if status != "run":
                continue
            other = place == "llama"  # another engine: its differences are reported, not failures
            m = re.search(r"\s(?:-t|--temperature)\s+([0-9.]+)", flags)
            sampling = not other and bool(m) and float(m.group(1)) > 0  # llama rows: -t is threads; greedy
            for ds in ("spec_bench", "human_eval"):
                short = "sb" if ds == "spec_bench" else "he"
                mine, ref = os.path.join(logs, "ids-%s-%s.jsonl" % (i, short)), os.path.join(logs, "ids-1-%s.jsonl" % short)
                if sampling or not (os.path.exists(mine) and os.path.exists(ref)):
                    f.write("%s\t%s\t0\t-\tnot checked (%s)\n" % (name, ds, "sampling" if sampling else "no ids"))
                    continue
                b, keys, diff = ids_of(ref), [], []
                # --repeat: a later pass's ids too (mine with -passN)
                for path in [mine] + sorted(glob.glob(os.path.join(logs, "ids-%s-%s-pass*.jsonl" % (i, short)))):
                    a = ids_of(path)
                    ks = sorted(set(a) & set(b))
                    keys += ks
                    diff += [k for k in ks if a[k] != b[k]]
                first = "%s" % (diff[0],) if diff else "-"
                if other:
                    first = "llama.cpp, not counted as a failure" + (": first " + first if diff else "")
                else:
                    bad += len(diff)
                f.write("%s\t%s\t%d\t%d\t%s\n" % (name, ds, len(keys), len(diff), first))
    print(bad)

def max_ctx(model):
    if os.path.isfile(model):  # a GGUF file: the engine's own cap
        print(4096)
        return
    c = json.load(open(os.path.join(model, "config.json")))
    print(min(int(c.get("max_position_embeddings", 4096)), 4096))

def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "add-turns":
    add_turns(args[0], args[1], args[2], int(args[3]), args[4])
elif cmd == "cluster":
    cluster(args[0], args[1], int(args[2]), int(args[3]), args[4] == "1", args[5])
elif cmd == "llama":
    llama(args[0], args[1], args[2], int(args[3]), int(args[4]), args[5], args[6])
elif cmd == "collect":
    collect(*args)
elif cmd == "summarize":
    summarize(*args)
elif cmd == "lossless":
    lossless(*args)
elif cmd == "json-str":  # a name as results.jsonl writes it (--resume looks it up)
    print(json.dumps(args[0]))
elif cmd == "max-ctx":
    max_ctx(args[0])
elif cmd == "free-port":
    free_port()
else:
    sys.exit("bench.py: unknown command " + cmd)
PY
py() { python3 "$work/bench.py" "$@"; }

gen_help=$("$T/microspec-generate" --help 2>&1 || true)
gen_has() { grep -q -- "$1[ ,=]" <<<"$gen_help"; }
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
cuda_ok=""  # cuda_usable: a GPU, and this build runs on it (probed once, with one token)
cuda_usable() {
  if [ -z "$cuda_ok" ]; then
    cuda_ok=no
    if [ "$gpus" != 0 ] && gen_has --device &&
       "$T/microspec-generate" --model "$model" --device cuda -p x -n 1 </dev/null >"$out/logs/cuda-probe.log" 2>&1; then
      cuda_ok=yes
    fi
  fi
  [ "$cuda_ok" = yes ]
}

# ---------------------------------------------------------------- configurations
if [ -z "$configs" ]; then
  # stories260K: the draft is the target's first 4 layers; static lists = the
  # top-K corpus ids at the same sizes as the W_max sweep (the coverage figure
  # compares them); ablations on the W_max=256 window; the cluster rows put the
  # same draft in its own process; the GPU rows are skipped on a machine without one.
  for k in 32 64 128 256; do
    "$T/microspec-freqlist" --tokenizer "$model" --k $k --out "$out/static-$k.txt" \
      "$shared/corpus/tinyshakespeare.txt" "$shared/corpus/wikitext2_valid.txt" 2>/dev/null ||
      die "microspec-freqlist failed"
  done
  configs=$work/configs.txt
  ls4="--draft-kind layerskip --draft-layers 4"
  cat >"$configs" <<EOF
AR (target alone)|
layerskip L=4, full vocabulary|$ls4 --vocab full
layerskip L=4, static K=32|$ls4 --vocab static --vocab-list @OUT@/static-32.txt
layerskip L=4, static K=64|$ls4 --vocab static --vocab-list @OUT@/static-64.txt
layerskip L=4, static K=128|$ls4 --vocab static --vocab-list @OUT@/static-128.txt
layerskip L=4, static K=256|$ls4 --vocab static --vocab-list @OUT@/static-256.txt
layerskip L=4, dynamic W_max=32|$ls4 --vocab dynamic --w-max 32
layerskip L=4, dynamic W_max=64|$ls4 --vocab dynamic --w-max 64
layerskip L=4, dynamic W_max=128|$ls4 --vocab dynamic --w-max 128
layerskip L=4, dynamic W_max=256|$ls4 --vocab dynamic --w-max 256
# ablations: one window stream at a time; the indexed LM head instead of the gathered dense GEMM
layerskip L=4, dynamic W_max=256, context stream only|$ls4 --vocab dynamic --w-max 256 --vocab-stream context
layerskip L=4, dynamic W_max=256, extension stream only|$ls4 --vocab dynamic --w-max 256 --vocab-stream extension
layerskip L=4, dynamic W_max=256, indexed LM head|$ls4 --vocab dynamic --w-max 256 --lm-head indexed
layerskip L=4, static K=64, indexed LM head|$ls4 --vocab static --vocab-list @OUT@/static-64.txt --lm-head indexed
# placement: the two-node cluster on this box
cluster sync, dynamic W_max=256|$ls4 --vocab dynamic --w-max 256|placement=cluster pipeline=sync
cluster overlap, dynamic W_max=256|$ls4 --vocab dynamic --w-max 256|placement=cluster pipeline=overlap
# device
GPU AR|--device cuda|device=cuda
GPU dynamic W_max=256|$ls4 --vocab dynamic --w-max 256 --device cuda|device=cuda
GPU cluster overlap, dynamic W_max=256|$ls4 --vocab dynamic --w-max 256|placement=cluster pipeline=overlap device=cuda
EOF
fi
[ -r "$configs" ] || die "$configs: cannot read"

# configs.tsv: 1 index, 2 name, 3 vocabulary, 4 W_max (dynamic only), 5 series
# (the flags without --w-max: configurations that differ only in W_max), 6
# flags, 7 placement, 8 pipeline, 9 device, 10 static K, 11 window stream
# (dynamic), 12 LM head, 13 status ("run" or "skipped: why")
names=() flags=() places=() pipes=() devs=() splits=() status=()
: >"$out/configs.tsv"
while IFS= read -r line || [ -n "$line" ]; do
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  [[ "$line" == *"|"* ]] || die "$configs: '$line' is not NAME|flags[|key=value ...]"
  name=${line%%|*} rest=${line#*|} kv=""
  [[ "$rest" == *"|"* ]] && { kv=${rest#*|}; rest=${rest%%|*}; }
  fl=$rest
  [[ "$name" =~ ^[^\"\\$'\t']+$ ]] || die "$configs: name '$name' is empty or has a quote, backslash or tab"
  for n in "${names[@]}"; do [ "$n" != "$name" ] || die "$configs: name '$name' twice"; done
  fl=${fl//@OUT@/$out}
  placement=single pipeline=sync device=cpu pipe_set=0 split=
  for w in $kv; do
    case $w in
      placement=single|placement=cluster|placement=llama) placement=${w#*=} ;;
      pipeline=sync|pipeline=overlap) pipeline=${w#*=} pipe_set=1 ;;
      device=cpu|device=cuda|device=cuda:[0-9]*) device=${w#*=} ;;
      threads=[1-9]*:[1-9]*) split=${w#*=} ;;
      *) die "$configs: '$name': '$w' is not placement=single|cluster|llama, pipeline=sync|overlap, threads=T:D or device=cpu|cuda[:N]" ;;
    esac
  done
  [ "$pipe_set" = 0 ] || [ "$placement" = cluster ] || die "$configs: '$name': pipeline= needs placement=cluster"
  [ -z "$split" ] || [ "$placement" = cluster ] || die "$configs: '$name': threads= needs placement=cluster"
  [ "$placement" = cluster ] || pipeline=—
  # a --device flag among the generate flags counts as the device too
  [[ " $fl " =~ \ --device\ ([a-z0-9:]+) ]] && device=${BASH_REMATCH[1]}
  [ "$placement" != llama ] || [ "$device" = cpu ] || die "$configs: '$name': placement=llama runs on the CPU only"
  vocab=—  # the same rule as microspec-generate: any draft flag makes it speculative, dynamic by default
  [ "$placement" = llama ] ||
    case " $fl " in *" --draft"* | *" --vocab"* | *" --w-max"* | *" --k-"* | *" --tree-"* | *" --chain"* | *" --lm-head"*) vocab=dynamic ;; esac
  [[ " $fl " =~ \ --vocab\ ([a-z]+) ]] && vocab=${BASH_REMATCH[1]}
  wmax=""; [ "$vocab" = dynamic ] && { wmax=3072; [[ " $fl " =~ \ --w-max\ ([0-9]+) ]] && wmax=${BASH_REMATCH[1]}; }
  k=""
  if [ "$vocab" = static ] && [[ " $fl " =~ \ --vocab-list\ ([^ ]+) ]]; then
    k=$(grep -c '^[0-9]' "${BASH_REMATCH[1]}" 2>/dev/null || true)
  fi
  stream=—; [ "$vocab" = dynamic ] && { stream=both; [[ " $fl " =~ \ --vocab-stream\ ([a-z]+) ]] && stream=${BASH_REMATCH[1]}; }
  head=—; [ "$vocab" = static ] || [ "$vocab" = dynamic ] && { head=gathered; [[ " $fl " =~ \ --lm-head\ ([a-z]+) ]] && head=${BASH_REMATCH[1]}; }
  series=$(sed -E 's/(^| )--w-max [0-9]+//' <<<"$fl")
  # skipped: no GPU; a flag this microspec-generate lacks; a flag the cluster config cannot say
  st=run
  if [ "$placement" = llama ]; then
    [ -x "$LB/llama-server" ] || st="skipped: no $LB/llama-server (tools/build-llamacpp.sh, or set LLAMA_BIN)"
  elif [ "$device" != cpu ] && [ "$gpus" = 0 ]; then
    st="skipped: no GPU"
  elif [ "$device" != cpu ] && ! cuda_usable; then
    st="skipped: this build does not run on the GPU (logs/cuda-probe.log)"
  elif [ "$placement" = single ]; then
    for f in --vocab-stream --lm-head --device; do
      if [[ " $fl " == *" $f "* ]] && ! gen_has "$f"; then st="skipped: microspec-generate has no $f"; break; fi
    done
  else
    for f in --vocab-stream --lm-head --device; do
      [[ " $fl " == *" $f "* ]] && { st="skipped: the cluster config has no key for $f"; break; }
    done
  fi
  names+=("$name") flags+=("$fl") places+=("$placement") pipes+=("$pipeline") devs+=("$device") splits+=("$split") status+=("$st")
  printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${#names[@]}" "$name" "$vocab" "$wmax" "$series" "$fl" \
    "$placement" "$pipeline" "$device" "$k" "$stream" "$head" "$st" >>"$out/configs.tsv"
done <"$configs"
[ ${#names[@]} -gt 0 ] || die "$configs: no configurations"
[ "${status[0]}" = run ] || die "the first configuration (the speedup's baseline) is ${status[0]}"
[ "${places[0]}" = single ] || [ -z "$(awk -F'\t' '$7 == "llama" && $13 == "run"' "$out/configs.tsv")" ] ||
  die "placement=llama reads the first configuration's prompt ids: it must be a single-process run"
awk -F'\t' '$13 != "run" { print $2 "\t" $13 }' "$out/configs.tsv" >"$out/skipped.tsv"
while IFS=$'\t' read -r n why; do echo "microspec_bench: '$n': $why" >&2; done <"$out/skipped.tsv"

# turn 2 in single-process runs needs microspec-generate --turns
turns_note="both turns of the MT-bench questions (second turns counted under Conv)"
gen_turns=()
if [ "$turns" = 1 ]; then
  turns_note="first turn only"
elif gen_has --turns; then
  gen_turns=(--turns 2)
else
  turns_note="both turns in cluster runs; first turn only in single-process runs (microspec-generate has no --turns)"
fi

# ---------------------------------------------------------------- prompts
# the prompt sets: warm-up copies first, then the categories in column order
pc=(); [ -n "$per_cat" ] && pc=(--per-category "$per_cat")
ph=("${pc[@]}"); [ -n "$per_he" ] && ph=(--per-category "$per_he")
mc=(); [ "$max_chars" != 0 ] && mc=(--max-chars "$max_chars")
"$T/microspec-bench-prompts" --spec-bench "$sb" "${pc[@]}" "${mc[@]}" --out-jsonl "$work/sb1.jsonl" --out-manifest "$work/sb.tsv"
"$T/microspec-bench-prompts" --human-eval "$he" "${ph[@]}" "${mc[@]}" --out-jsonl "$work/he.jsonl" --out-manifest "$work/he.tsv"
if [ "$turns" = 2 ]; then
  n2=$(py add-turns "$work/sb1.jsonl" "$work/sb.tsv" "$sb" "$max_chars" "$work/sb.jsonl")
  echo "microspec_bench: $n2 Spec-Bench prompt(s) with a second turn" >&2
else
  mv "$work/sb1.jsonl" "$work/sb.jsonl"
fi
datasets=(sb he)
declare -A dsname=([sb]=spec_bench [he]=human_eval) maxnew=([sb]=$max_sb [he]=$max_he)
total=0 n_run=0
for i in "${!names[@]}"; do [ "${status[$i]}" = run ] && n_run=$((n_run + 1)); done
for ds in "${datasets[@]}"; do total=$(( total + $(wc -l <"$work/$ds.tsv") * n_run * repeat )); done

# progress bar: questions done (warm-up included) over all runs; drawn again only when it
# changes, and on a terminal in place (to a log file: one line a change, not a redraw a poll)
done_q=0 last_bar=""
bar() { # bar DONE LABEL
  [ "$1 $2" != "$last_bar" ] || return 0
  last_bar="$1 $2"
  local w=30 f=$(( $1 * 30 / total )) line
  line=$(printf '[%-*s] %d/%d %s' $w "$(printf '%*s' $f '' | tr ' ' '#')" "$1" "$total" "$2")
  if [ -t 2 ]; then printf '\r%s\033[K' "$line" >&2; else printf '%s\n' "$line" >&2; fi
}
# questions started in a stats file (a line per turn; the second turns do not count)
started() { grep -vc '"turn": 2' "$1" || true; }

# ---------------------------------------------------------------- the cluster
# cluster_config FLAGS PIPELINE DEVICE PORT FILE [T:D]: the cluster config of a generate flag list
cluster_config() {
  local -a a
  read -r -a a <<<"$1"
  local kind="" layers="" vocab="" list="" wmax="" kpre="" kver="" tk="" td="" tt="" chain=false threads="" draft=false j
  local dmodel="" q8="" pmin="" policy=""
  for ((j = 0; j < ${#a[@]}; j++)); do
    case ${a[$j]} in
      --draft-kind) kind=${a[++j]}; draft=true ;;
      --draft-layers) layers=${a[++j]}; draft=true ;;
      --vocab) vocab=${a[++j]}; draft=true ;;
      --vocab-list) j=$((j + 1)); list=$(cd "$(dirname "${a[j]}")" && pwd)/$(basename "${a[j]}"); draft=true ;;
      --w-max) wmax=${a[++j]}; draft=true ;;
      --k-pre) kpre=${a[++j]}; draft=true ;;
      --k-ver) kver=${a[++j]}; draft=true ;;
      --tree-k) tk=${a[++j]}; draft=true ;;
      --tree-depth) td=${a[++j]}; draft=true ;;
      --tree-total) tt=${a[++j]}; draft=true ;;
      --chain) chain=true; draft=true ;;
      --threads) threads=${a[++j]} ;;
      --draft) j=$((j + 1)); dmodel=$(cd "$(dirname "${a[j]}")" && pwd)/$(basename "${a[j]}"); draft=true ;;
      --q8-matmul) q8=true ;;
      --f32-matmul) q8=false ;;
      --draft-p-min) pmin=${a[++j]}; draft=true ;;
      --draft-policy) policy=${a[++j]}; draft=true ;;
      *) die "cluster: flag '${a[$j]}' has no cluster config key" ;;
    esac
  done
  local dev=$3 max_new=$(( max_sb > max_he ? max_sb : max_he )); [ "$dev" = cuda ] && dev=cuda:0
  local tthreads=$threads dthreads=$threads
  [ -z "${6:-}" ] || { tthreads=${6%%:*}; dthreads=${6#*:}; }
  {
    echo "target = { model = \"$model_abs\"; max_ctx = $(py max-ctx "$model_abs"); device = \"$dev\";${tthreads:+ threads = $tthreads;}${q8:+ q8_matmul = $q8;} };"
    echo "draft = { enabled = $draft;${kind:+ kind = \"$kind\";}${dmodel:+ model = \"$dmodel\";}${layers:+ layers = $layers;}${pmin:+ p_min = $pmin;}${policy:+ policy = \"$policy\";} device = \"$dev\";${dthreads:+ threads = $dthreads;} };"
    echo "vocab = {${vocab:+ mode = \"$vocab\";}${wmax:+ w_max = $wmax;}${kpre:+ k_pre = $kpre;}${kver:+ k_ver = $kver;}${list:+ list = \"$list\";} };"
    echo "tree = {${tk:+ top_k = $tk;}${td:+ depth = $td;}${tt:+ total = $tt;} chain = $chain; };"
    echo "pipeline = \"$2\";"
    echo "link = { endpoint = \"ipc://$work/link-$4.sock\"; deadline_ms = 10000; heartbeat_ms = 200; };"
    echo "http = { listen = \"127.0.0.1\"; port = $4; queue = 2; max_tokens_default = $max_new; max_tokens_limit = $max_new; request_timeout_s = 3600; };"
    echo "log = { level = \"warn\"; };"
  } >"$5"
}

# free_port: a port for a server this run starts, below the kernel's ephemeral
# range and reserved (itest-tool): one from bind(0) can be taken by an outgoing
# connection before the server binds it
free_port() { "$build/tests/itest-tool" free-port 2>/dev/null || py free-port; }

# cluster_start I LOG: a cluster of config I, its state in $run_dir (so that
# the EXIT trap stops it too); its URL in $url
cluster_start() {
  local i=$1 log=$2 port cfg
  port=$(free_port)
  cfg=$out/logs/$((i + 1))-cluster.cfg
  cluster_config "${flags[$i]}" "${pipes[$i]}" "${devs[$i]}" "$port" "$cfg" "${splits[$i]}"
  run_dir=$work/run-$i
  RUN_DIR=$run_dir bash "$root/cluster/launch.sh" "$cfg" --build "$build_abs" --logs "$out/logs/$((i + 1))-nodes" \
    >"$log" 2>&1 || { tail -20 "$log" >&2; die "config '${names[$i]}': the cluster did not start (log: $log)"; }
  url=$(cat "$run_dir/url")
}
cluster_stop() {
  RUN_DIR=$run_dir bash "$root/cluster/stop.sh" >/dev/null 2>&1 || true
  run_dir=""
}

# llama_start I LOG: llama-server with config I's flags; its URL in $url, its pid in $llama_pid
llama_start() {
  local i=$1 log=$2 port k
  port=$(free_port)
  # shellcheck disable=SC2086 # the flags are words
  "$LB/llama-server" -m "$model_abs" -c 4096 -np 1 --host 127.0.0.1 --port "$port" ${flags[$i]} >"$log" 2>&1 &
  llama_pid=$!
  url=http://127.0.0.1:$port
  for ((k = 0; k < 600; k++)); do # a model load: up to 5 minutes
    kill -0 "$llama_pid" 2>/dev/null || { tail -20 "$log" >&2; die "config '${names[$i]}': llama-server exited (log: $log)"; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" 2>/dev/null || true)" = 200 ] && return 0
    sleep 0.5
  done
  die "config '${names[$i]}': llama-server not ready after 5 minutes (log: $log)"
}
llama_stop() {
  kill "$llama_pid" 2>/dev/null || true
  wait "$llama_pid" 2>/dev/null || true
  llama_pid=""
}

# ---------------------------------------------------------------- the runs
t_start=$(date +%s.%N)
# --resume: the (configuration, dataset) pairs already in results.jsonl are not run again
have() { [ "$resume" = 1 ] && grep -F "\"config\": $(py json-str "$1"), \"dataset\": \"$2\"" "$out/results.jsonl" |
  grep -qF "\"pass\": $pass,"; }
if [ "$resume" = 1 ] && [ -s "$out/results.jsonl" ]; then
  echo "microspec_bench: resuming: $(wc -l <"$out/results.jsonl") result line(s) kept" >&2
else
  : >"$out/results.jsonl"
fi
for ((pass = 1; pass <= repeat; pass++)); do
order=("${!names[@]}")
if [ $((pass % 2)) = 0 ]; then # even passes run the list backwards
  for ((j = 0, k = ${#order[@]} - 1; j < k; j++, k--)); do t=${order[j]} order[j]=${order[k]} order[k]=$t; done
fi
sfx=""; [ "$pass" = 1 ] || sfx=-pass$pass # a later pass's logs and ids beside the first's
for i in "${order[@]}"; do
  [ "${status[$i]}" = run ] || continue
  name=${names[$i]}
  todo=0
  for ds in "${datasets[@]}"; do have "$name" "${dsname[$ds]}" || todo=1; done
  if [ "$todo" = 0 ]; then
    for ds in "${datasets[@]}"; do done_q=$(( done_q + $(wc -l <"$work/$ds.tsv") )); done
    continue
  fi
  case ${places[$i]} in
    cluster) cluster_start "$i" "$out/logs/$((i + 1))-cluster.log" ;;
    llama) llama_start "$i" "$out/logs/$((i + 1))-llama-server.log" ;;
  esac
  for ds in "${datasets[@]}"; do
    nq=$(wc -l <"$work/$ds.tsv") stats=$work/stats-$i-$ds$sfx.jsonl log=$out/logs/$((i + 1))-$ds$sfx.log
    if have "$name" "${dsname[$ds]}"; then done_q=$(( done_q + nq )); continue; fi
    : >"$stats"
    if [ "${places[$i]}" = llama ]; then
      src=$out/logs/ids-1-$ds.jsonl
      [ -s "$src" ] || die "config '$name': $src missing (placement=llama reads the first configuration's prompt ids)"
      py llama "$url" "$src" "$(wc -l <"$work/$ds.tsv")" "${maxnew[$ds]}" "$turns" "$stats" \
        "$out/logs/ids-$((i + 1))-$ds$sfx.jsonl" >"$log" 2>"$log.err" &
    elif [ "${places[$i]}" = cluster ]; then
      py cluster "$url" "$work/$ds.jsonl" "${maxnew[$ds]}" "$turns" "$([ -n "$chat" ] && echo 1 || echo 0)" "$stats" \
        >"$log" 2>"$log.err" &
    else
      dv=(); [ "${devs[$i]}" = cpu ] || [[ " ${flags[$i]} " == *" --device "* ]] || dv=(--device "${devs[$i]}")
      # shellcheck disable=SC2086 # the flags are words
      ids=(); gen_has --ids-out && ids=(--ids-out "$out/logs/ids-$((i + 1))-$ds$sfx.jsonl")
      "$T/microspec-generate" --model "$model" $chat --prompts-jsonl "$work/$ds.jsonl" -n "${maxnew[$ds]}" --quiet \
        "${gen_turns[@]}" "${dv[@]}" "${ids[@]}" --stats-out "$stats" ${flags[$i]} >"$log" 2>"$log.err" &
    fi
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      bar $(( done_q + $(started "$stats") )) "$name, ${dsname[$ds]}"
      sleep 0.5 # a poll forks a grep: seldom, on a machine the benchmark has to itself
    done
    wait "$pid" || { echo >&2; tail -20 "$log.err" >&2; die "config '$name' on ${dsname[$ds]} failed (log: $log.err)"; }
    done_q=$(( done_q + nq ))
    bar $done_q "$name, ${dsname[$ds]}"
    py collect "$work/$ds.tsv" "$stats" "$name" "${dsname[$ds]}" "$out/results.jsonl" "$pass"
    skipped=$(grep -c 'no room\|skipped' "$log.err" || true)
    [ "$skipped" = 0 ] || echo -e "\nmicrospec_bench: $name, ${dsname[$ds]}: $skipped prompt(s) or turn(s) too long for the context, skipped" >&2
  done
  case ${places[$i]} in
    cluster) cluster_stop ;;
    llama) llama_stop ;;
  esac
done
done
t_end=$(date +%s.%N)
echo >&2

py summarize "$out/results.jsonl" "$out/configs.tsv" "$out/summary.jsonl"
n_diff=$(py lossless "$out/logs" "$out/configs.tsv" "$out/lossless.tsv")
if [ "$n_diff" != 0 ]; then
  echo "microspec_bench: LOSSLESSNESS FAILURE: $n_diff (prompt, turn) outputs differ from the first configuration's (lossless.tsv)" >&2
fi

if commit=$(git rev-parse --short HEAD 2>/dev/null); then
  [ -z "$(git status --porcelain -- . ':(exclude)results' ':(exclude)build*' 2>/dev/null)" ] ||
    commit="$commit (with uncommitted changes)"
else
  commit=unknown
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
gpu=$( (nvidia-smi -L 2>/dev/null || true) | head -1 | sed 's/ (UUID.*//')
{
  echo "machine: $(uname -n), $(uname -sm), ${cpu:-unknown CPU}, $(nproc) cores, ${gpu:-no GPU}"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "commit: $commit"
  echo "command: ${MS_BUILD_DIR:+MS_BUILD_DIR=$MS_BUILD_DIR }${MS_SHARED_DIR:+MS_SHARED_DIR=$MS_SHARED_DIR }tools/bench/microspec_bench.sh ${argv[*]}"
  echo "model: $model"
  echo "protocol: greedy; max new tokens $max_sb (Spec-Bench) / $max_he (HumanEval) per turn; ${per_cat:-all} question(s) per category (Spec-Bench: of the evaluation split, the first three quarters of each source category)$([ -n "$per_he" ] && echo ", $per_he HumanEval question(s)"); first question 3x untimed;$([ "$repeat" = 1 ] || echo " $repeat passes over the configurations, every other one in reverse order, each question's lines averaged over them;") prompts $([ -n "$chat" ] && echo "through the chat template" || echo "encoded raw (no chat template)")$([ "$max_chars" != 0 ] && echo ", each turn cut to $max_chars bytes"); $turns_note; threads as each configuration's flags say (--threads; default all cores)"
  echo "runtime: $(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }') s"
} >"$out/meta.txt"
echo "microspec_bench: wrote $out/results.jsonl, $out/summary.jsonl" >&2
[ "$report" = 0 ] || "$root/tools/bench/microspec_report.sh" "$out"
[ "$n_diff" = 0 ] # a speculative row that changed the output fails the run
