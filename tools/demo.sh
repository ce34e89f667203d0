#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, launch a
# two-node MicroSpec cluster (target + draft, CPU, one box) on the default
# model, send it one chat request, and print the answer and its statistics.
#
#   tools/demo.sh [--model DIR] [--prompt TEXT] [--config FILE] [--keep]
#
# Default model: ../shared/models/stories260k (llama2.c format), converted once
# into build/models/stories260k. Without ../shared, pass --model DIR (a Hugging
# Face model folder). --keep leaves the cluster running (stop it with
# cluster/stop.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

model="" prompt="Once upon a time" config="$root/cluster/configs/cpu-one-box.cfg" keep=false
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --keep) keep=true; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

bash tools/install-deps.sh
build="$root/build/release"
echo "demo: building in $build" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

if [ -z "$model" ]; then
  shared="$root/../shared/models/stories260k"
  if [ ! -f "$shared/stories260K.bin" ]; then
    echo "demo: no default model: ../shared/models/stories260k is not beside this checkout." >&2
    echo "demo: pass a Hugging Face model directory: tools/demo.sh --model DIR" >&2
    exit 2
  fi
  model="$root/build/models/stories260k"
  if [ ! -f "$model/config.json" ]; then
    echo "demo: converting $shared to $model" >&2
    mkdir -p "$(dirname "$model")"
    "$build/tools/convert-llama2c" "$shared/stories260K.bin" "$shared/tok512.bin" "$model"
  fi
fi
model=$(cd "$model" && pwd)

# The example config with this model (an absolute path) in a run folder.
run="$root/build/demo"
mkdir -p "$run"
awk -v m="$model" 'BEGIN{s=0} /^target *=/{s=1} s==1 && /^ *model *=/{sub(/=.*/, "= \"" m "\";"); s=2} {print}' \
  "$config" >"$run/cluster.cfg"

RUN_DIR="$run" bash cluster/stop.sh >/dev/null 2>&1 || true
RUN_DIR="$run" bash cluster/launch.sh "$run/cluster.cfg" --build "$build" --logs "$run/logs"
url=$(cat "$run/url")
stop_cluster() { [ "$keep" = true ] || RUN_DIR="$run" bash cluster/stop.sh >/dev/null 2>&1 || true; }
trap stop_cluster EXIT

body=$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":sys.argv[1]}],"max_tokens":200,"temperature":0}))' "$prompt")
echo "demo: POST $url/v1/chat/completions  (greedy, 200 tokens)" >&2
curl -s -m 120 "$url/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" >"$run/answer.json"
python3 - "$run/answer.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if "error" in r:
    sys.exit("demo: the server answered with an error: " + json.dumps(r["error"]))
print(r["choices"][0]["message"]["content"])
m = r["microspec"]
print("\n--- statistics (stderr of the nodes: build/demo/logs) ---", file=sys.stderr)
print(f"tokens: {r['usage']['completion_tokens']} new after {r['usage']['prompt_tokens']} prompt; "
      f"{m['tokens_per_s']:.1f} tokens/s; mean accepted length {m['mean_accepted_length']:.2f} tokens/forward "
      f"over {m['rounds']} target forwards", file=sys.stderr)
print(f"draft vocabulary: mean {m['vocab_mean']:.0f} rows (max {m['vocab_max']}), coverage {m['coverage']:.3f}; "
      f"acceptance by depth: {', '.join('%.2f' % a for a in m['acceptance_by_depth'][:6])}", file=sys.stderr)
print(f"time (ms): prefill {m['prefill_ms']:.1f}, draft {m['draft_backbone_ms']:.1f} + head {m['draft_head_ms']:.1f}, "
      f"verify {m['verify_ms']:.1f}, accept {m['accept_ms']:.1f}, total {m['total_ms']:.1f}", file=sys.stderr)
PY
if [ "$keep" = true ]; then echo "demo: cluster left running at $url (stop: RUN_DIR=$run cluster/stop.sh)" >&2; fi
