#!/usr/bin/env bash
# What the link costs, and sync vs overlap: the same prompts and draft run
# (1) in one process (microspec-generate, the draft called directly), and
# (2) as a two-node cluster over ipc:// and tcp:// (loopback), in pipeline
# sync and overlap. Prints a Markdown table and writes it to
# build/bench/cluster-report.md. Outside CI (minutes).
#
#   tools/bench/bench_cluster.sh [N prompts (default 20)] [max new tokens (default 128)]
#
# Model: stories260K (real weights), layerskip draft of L layers (DRAFT_LAYERS,
# default 4), dynamic vocabulary W_max 256, tree 4/4/16 (TREE="k depth total").
# Link cost per round = time inside the draft port's calls minus the work the
# draft reports for them (see ms_gen_stats.link_us): median and p99.
set -euo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_cluster.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
n=${1:-20} max_new=${2:-128}
L=${DRAFT_LAYERS:-4}
read -r tk td tt <<<"${TREE:-4 4 16}"
build=${MS_BUILD_DIR:-$root/build/release} # one build folder: what tools/demo.sh builds
out=$root/build/bench
shared=$root/../shared
mkdir -p "$out" "$root/build/models"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
model=$root/build/models/stories260k
[ -f "$model/config.json" ] || "$build/tools/convert-llama2c" "$shared/models/stories260k/stories260K.bin" "$shared/models/stories260k/tok512.bin" "$model"
sb=$shared/data/spec_bench/question.jsonl
work=$(mktemp -d)
trap 'for r in "$work"/run-*; do [ -d "$r" ] && RUN_DIR=$r bash "$root/cluster/stop.sh" >/dev/null 2>&1; done; rm -rf "$work"' EXIT

md=$out/cluster-report.md
{
  echo "# The link's cost and the pipelines: stories260K, layerskip L=$L, dynamic W_max 256, tree $tk/$td/$tt"
  echo
  echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); date: $(date -u +%F); commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "command: tools/bench/bench_cluster.sh $n $max_new (first $n Spec-Bench prompts, greedy, max $max_new new tokens; tokens/s = mean over prompts of new tokens / wall time incl. prefill, as the target measures it)"
  echo
  echo "| placement | pipeline | link per round, median µs | p99 µs | tokens/s | mean accepted length |"
  echo "|---|---|---|---|---|---|"
} >"$md"

# (1) in one process
flags=(--draft-kind layerskip --draft-layers "$L" --vocab dynamic --w-max 256 --tree-k "$tk" --tree-depth "$td" --tree-total "$tt")
"$build/tools/microspec-generate" --model "$model" --prompts-jsonl "$sb" --first "$n" -n "$max_new" --quiet "${flags[@]}" \
  >"$work/inproc.txt" 2>/dev/null
med=$(sed -nE 's/^link per round.*median ([0-9.]+) us, p99 ([0-9.]+) us.*/\1/p' "$work/inproc.txt")
p99=$(sed -nE 's/^link per round.*median ([0-9.]+) us, p99 ([0-9.]+) us.*/\2/p' "$work/inproc.txt")
tps=$(sed -nE 's/.*tokens\/s \(mean over prompts\): ([0-9.]+).*/\1/p' "$work/inproc.txt")
acc=$(sed -nE 's/^mean accepted length: ([0-9.]+).*/\1/p' "$work/inproc.txt")
echo "| one process (direct call) | sync | $med | $p99 | $tps | $acc |" | tee -a "$md"

# (2) two processes
port=18300
for transport in ipc tcp; do
  for pipeline in sync overlap; do
    port=$((port + 1))
    ep="ipc://$work/link-$pipeline.sock"; [ "$transport" = tcp ] && ep="tcp://127.0.0.1:$((port + 1000))"
    cfg=$work/$transport-$pipeline.cfg
    cat >"$cfg" <<CFG
target = { model = "$model"; max_ctx = 512; };
draft = { enabled = true; kind = "layerskip"; layers = $L; };
vocab = { mode = "dynamic"; w_max = 256; };
tree = { top_k = $tk; depth = $td; total = $tt; };
pipeline = "$pipeline";
link = { endpoint = "$ep"; deadline_ms = 5000; heartbeat_ms = 200; };
http = { listen = "127.0.0.1"; port = $port; max_tokens_limit = 4096; };
log = { level = "warn"; };
CFG
    run=$work/run-$transport-$pipeline
    RUN_DIR=$run bash "$root/cluster/launch.sh" "$cfg" --build "$build" >/dev/null
    url=$(cat "$run/url")
    : >"$work/resp.jsonl"
    head -n "$n" "$sb" | while IFS= read -r line; do
      body=$(python3 -c 'import json,sys; q=json.loads(sys.stdin.read()); print(json.dumps({"prompt": q["turns"][0], "max_tokens": int(sys.argv[1]), "temperature": 0}))' "$max_new" <<<"$line")
      curl -s -m 300 "$url/v1/completions" -d "$body" >>"$work/resp.jsonl"
      echo >>"$work/resp.jsonl"
    done
    metrics=$(curl -s "$url/metrics")
    RUN_DIR=$run bash "$root/cluster/stop.sh" >/dev/null 2>&1
    # microspec_link_round_seconds (base unit) → microseconds for the table
    med=$(awk -F'} ' '/^microspec_link_round_seconds\{quantile="0.5"\}/ { printf "%.1f", $2 * 1e6 }' <<<"$metrics")
    p99=$(awk -F'} ' '/^microspec_link_round_seconds\{quantile="0.99"\}/ { printf "%.1f", $2 * 1e6 }' <<<"$metrics")
    read -r tps acc < <(python3 -c '
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ms = [r["microspec"] for r in rs if "microspec" in r]
tps = sum(m["tokens_per_s"] for m in ms) / max(1, len(ms))
rounds = sum(m["rounds"] for m in ms)
acc = sum(m["mean_accepted_length"] * m["rounds"] for m in ms) / max(1, rounds)
print("%.1f %.3f" % (tps, acc))' "$work/resp.jsonl")
    echo "| two processes, $transport | $pipeline | $med | $p99 | $tps | $acc |" | tee -a "$md"
  done
done
echo
echo "written: $md"
