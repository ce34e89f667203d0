#!/usr/bin/env bash
# The pair on two "hosts" (issue 32): the target and the draft each in its own
# network namespace, joined by a veth pair (TCP between 10.200.0.1 and
# 10.200.0.2), each pinned to its own core (taskset) with one thread, started
# by cluster/launch.sh; against the target alone on one core, served the same
# way. Pipelines sync and overlap. HumanEval chats over the HTTP API, greedy
# (after one short untimed request per cluster);
# every answer's text must equal the target-alone answer. Prints a Markdown
# table and writes it to --out. Needs root (ip netns) and 2 cores. Minutes.
#
#   tools/bench/bench_twohosts.sh [--prompts N] [--tokens N] [--passes N] [--draft-kind K] [--out FILE]
#
#   --prompts N      HumanEval chats (default 5: the first N of the set)
#   --tokens N       max new tokens per answer (default 192)
#   --passes N       rounds over the rows, every other one backwards
#                    (AR sync overlap, overlap sync AR, ...): default 2
#   --draft-kind K   the draft's kind (default lm+ngram, as --draft's default)
#   --form F         how a task becomes a chat: code (default; as
#                    tools/bench/bench_pair.sh asks: "Complete the following
#                    Python function. Reply with code only." and the prompt)
#                    or bare (the HumanEval prompt alone, as the driver sends it)
#   --out FILE       the report (default build/bench/twohosts.md; per request
#                    beside it as FILE without .md + .jsonl)
#
# Models: the Qwen2.5-Coder pair (tools/install-models.sh installs them);
# target threads 1 on core 0, draft threads 1 on core 1; the target's q8
# matmuls; chain depth 4, p_min 0.7, the cost policy (the shipped pair's
# settings). MS_BUILD_DIR: the build (default build/release); MS_ISA caps the
# kernels of both nodes (e.g. avx2).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
n=5 tok=192 passes=2 kind=lm+ngram form=code out=$root/build/bench/twohosts.md
die() { echo "bench_twohosts: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --prompts) n=$2; shift 2 ;;
    --tokens) tok=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --draft-kind) kind=$2; shift 2 ;;
    --form) form=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "bench_twohosts: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$n" =~ ^[1-9][0-9]*$ && "$tok" =~ ^[1-9][0-9]*$ && "$passes" =~ ^[1-9]$ ]] ||
  die "--prompts, --tokens and --passes take positive counts (passes 1-9)"
[ "$form" = code ] || [ "$form" = bare ] || die "--form takes code or bare, not '$form'"
[ "$(id -u)" = 0 ] && command -v ip >/dev/null || die "needs root and iproute2 (ip netns)"
[ "$(nproc)" -ge 2 ] || die "needs 2 cores (one per node)"
build=$(cd "${MS_BUILD_DIR:-$root/build/release}" && pwd) || die "no build folder"
shared=${MS_SHARED_DIR:-$root/../shared}
he=$shared/data/human_eval/question.jsonl
[ -r "$he" ] || die "$he missing (set MS_SHARED_DIR)"
tgt=$(bash "$root/tools/install-models.sh" --path qwen2.5-coder-1.5b)
dft=$(bash "$root/tools/install-models.sh" --path qwen2.5-coder-0.5b)
[ -r "$tgt" ] && [ -r "$dft" ] || die "the Qwen pair is not installed: tools/install-models.sh qwen2.5-coder-1.5b qwen2.5-coder-0.5b"
mkdir -p "$(dirname "$out")"

work=$(mktemp -d)
ns1=msb$$t ns2=msb$$d
cleanup() {
  for r in "$work"/run-*; do [ -d "$r" ] && RUN_DIR=$r bash "$root/cluster/stop.sh" >/dev/null 2>&1; done
  ip netns del "$ns1" 2>/dev/null || true
  ip netns del "$ns2" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns1" && ip netns add "$ns2" || die "cannot create network namespaces"
ip link add "v$$t" type veth peer name "v$$d" || die "cannot create a veth pair"
ip link set "v$$t" netns "$ns1" && ip link set "v$$d" netns "$ns2"
ip -n "$ns1" addr add 10.200.0.1/24 dev "v$$t" && ip -n "$ns2" addr add 10.200.0.2/24 dev "v$$d"
for ns in "$ns1" "$ns2"; do ip -n "$ns" link set lo up; done
ip -n "$ns1" link set "v$$t" up && ip -n "$ns2" link set "v$$d" up

python3 - "$he" "$n" "$form" >"$work/prompts.jsonl" <<'PY'
import json, sys
lead = "Complete the following Python function. Reply with code only.\n\n" if sys.argv[3] == "code" else ""
for i, l in enumerate(open(sys.argv[1], encoding="utf-8")):
    if i >= int(sys.argv[2]):
        break
    q = json.loads(l)
    print(json.dumps({"id": q.get("task_id", i), "text": lead + q["prompt"]}))
PY

# config ROW FILE PORT LINKPORT: the cluster config of a row (ar | sync | overlap)
config() {
  local draft=true pipe=$1
  [ "$1" = ar ] && draft=false pipe=sync
  cat >"$2" <<EOF
target = { model = "$tgt"; max_ctx = 2048; threads = 1; device = "cpu"; q8_matmul = true; };
draft = { enabled = $draft; kind = "$kind"; model = "$dft"; threads = 1; device = "cpu"; p_min = 0.7; };
vocab = { mode = "dynamic"; };
tree = { top_k = 1; depth = 4; total = 5; chain = true; };
pipeline = "$pipe";
link = { endpoint = "tcp://10.200.0.1:$4"; deadline_ms = 30000; };
http = { listen = "10.200.0.1"; port = $3; queue = 2; max_tokens_default = $tok; max_tokens_limit = $tok; idle_timeout_s = 60; };
hosts = { target = "netns:$ns1"; draft = "netns:$ns2"; };
log = { level = "info"; };
EOF
  "$build/tools/microspec-config" "$2" --check >/dev/null || die "the $1 config does not validate"
}

# run ROW PASS: start the row's cluster, pin its nodes, ask every prompt, stop it
run() {
  local row=$1 pass=$2 port=$((20000 + RANDOM % 20000)) lport=$((40000 + RANDOM % 20000)) rd=$work/run-$1-$2
  config "$row" "$work/$row.cfg" "$port" "$lport"
  echo "bench_twohosts: pass $pass, $row: starting the cluster" >&2
  RUN_DIR=$rd ip netns exec "$ns1" "$root/cluster/launch.sh" "$work/$row.cfg" --build "$build" --timeout 300 \
    --logs "$work/logs-$row-$pass" >"$work/launch-$row-$pass.log" 2>&1 ||
    { tail -20 "$work/launch-$row-$pass.log" >&2; die "$row: launch.sh failed"; }
  local pid
  pid=$(awk '$1 == "target" {print $3}' "$rd/pids"); taskset -a -p -c 0 "$pid" >/dev/null
  if [ "$row" != ar ]; then pid=$(awk '$1 == "draft" {print $3}' "$rd/pids"); taskset -a -p -c 1 "$pid" >/dev/null; fi
  ip netns exec "$ns1" python3 - "http://10.200.0.1:$port" "$work/prompts.jsonl" "$tok" "$row" "$pass" \
    >>"$work/results.jsonl" <<'PY' || die "$row: the client failed"
import json, sys, time, urllib.request
url, prompts, tok, row, pas = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
def ask(text, n):
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": n, "temperature": 0}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        return json.loads(r.read())
ask("Write a Python function that adds two numbers.", 16)  # untimed: the first request measures the verify costs
for l in open(prompts, encoding="utf-8"):
    q = json.loads(l)
    t0 = time.monotonic()
    resp = ask(q["text"], tok)
    wall = time.monotonic() - t0
    m = resp.get("microspec") or {}
    print(json.dumps({"row": row, "pass": pas, "id": q["id"], "wall_s": wall,
                      "tokens": resp["usage"]["completion_tokens"], "text": resp["choices"][0]["message"]["content"],
                      "spec_rounds": m.get("spec_rounds", 0), "rounds": m.get("rounds", 0),
                      "mean_accepted": m.get("mean_accepted_length", 1.0), "stats": m}))
    print("bench_twohosts: %s %s: %d tokens in %.2f s" % (row, q["id"], resp["usage"]["completion_tokens"], wall),
          file=sys.stderr)
PY
  RUN_DIR=$rd bash "$root/cluster/stop.sh" >/dev/null 2>&1 || true
  rm -rf "$rd"
  if [ "$row" = overlap ]; then # the draft's running count of pre-drafts, at its last request
    sed -n 's/.*pre-drafts so far: \([0-9]*\) confirmed, \([0-9]*\) dropped.*/\1 \2/p' \
      "$work/logs-$row-$pass/draft.log" | tail -1 >>"$work/predraft-counts"
  fi
}

rows=(ar sync overlap)
for ((p = 1; p <= passes; p++)); do
  order=("${rows[@]}")
  [ $((p % 2)) = 1 ] || order=(overlap sync ar)
  for row in "${order[@]}"; do run "$row" "$p"; done
done

[ -s "$work/predraft-counts" ] &&
  awk '{h += $1; d += $2} END {printf "%d / %d", h, h + d}' "$work/predraft-counts" >"$work/predrafts"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
python3 - "$work/results.jsonl" "$n" "$tok" "$passes" "$kind" "${MS_ISA:-native}" "$cpu" "$form" \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(cat "$work/predrafts" 2>/dev/null)" >"$out" <<'PY'
import json, sys
res, n, tok, passes, kind, isa, cpu, form, commit, pre_counts = sys.argv[1:]
rows = [json.loads(l) for l in open(res)]
by = {}
for r in rows:
    by.setdefault(r["row"], []).append(r)
ar_text = {r["id"]: r["text"] for r in by["ar"] if r["pass"] == 1}
print("# The pair on two hosts: two network namespaces, one core each\n")
print("CPU %s, kernels %s, commit %s; %s HumanEval chats (%s), %s new tokens at most, %s passes (alternating order); "
      "target Qwen2.5-Coder 1.5B (q8 matmuls, 1 thread, core 0), draft 0.5B kind %s (1 thread, core 1), chain "
      "depth 4, p_min 0.7, cost policy; TCP over a veth pair; times at the client.\n" % (cpu, isa, commit, n,
      "code only, as bench_pair.sh asks" if form == "code" else "the bare prompt", tok, passes, kind))
print("| row | tokens/s | vs target alone | after prefill: tokens/s | vs target alone | prefill share | accepted length "
      "| pre-drafts confirmed | texts identical |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
base = base_dec = None
for row in ("ar", "sync", "overlap"):
    rs = by.get(row, [])
    t = sum(r["tokens"] for r in rs); w = sum(r["wall_s"] for r in rs)
    tps = t / w if w else 0.0
    pre = sum(r["stats"].get("prefill_ms", 0.0) for r in rs) / 1e3
    dec = sum(r["stats"].get("total_ms", 0.0) for r in rs) / 1e3 - pre
    dps = t / dec if dec > 0 else 0.0
    base = base or tps
    base_dec = base_dec or dps
    rounds = sum(r["rounds"] for r in rs)
    acc = sum(r["mean_accepted"] * r["rounds"] for r in rs) / rounds if rounds else 1.0
    same = sum(r["text"] == ar_text.get(r["id"]) for r in rs)
    name = {"ar": "target alone (AR, 1 core)", "sync": "pair, sync", "overlap": "pair, overlap"}[row]
    pd = (pre_counts or "n/a") if row == "overlap" else "-"
    print("| %s | %.2f | %.2fx | %.2f | %.2fx | %.0f %% | %.2f | %s | %d/%d |" % (
        name, tps, tps / base if base else 0, dps, dps / base_dec if base_dec else 0, 100 * pre / w if w else 0,
        acc, pd, same, len(rs)))
print("\nAfter prefill: the server's own time from the first generated token on (the prefill is the target's "
      "alone in every row). Pre-drafts: the overlap draft's bets on the next round, confirmed / made (its log; the "
      "untimed first requests included).")
bad = sum(r["text"] != ar_text.get(r["id"]) for r in rows)
if bad:
    print("\n**%d answers differ from the target alone's.**" % bad)
    sys.exit(1)
PY
rc=$?
cp "$work/results.jsonl" "${out%.md}.jsonl" # per request: texts, times, rounds
cat "$out"
exit $rc
