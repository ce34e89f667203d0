#!/usr/bin/env bash
# Greedy reference generations from llama.cpp for the real GGUF models.
#
#   make_llamacpp_ref.sh NAME [--fa on|off|auto] [--out FILE]
#       starts llama-server on loopback, writes greedy_NAME.json (default here),
#       stops the server. NAME: gemma3-270m | qwen2.5-coder-0.5b | qwen2.5-coder-1.5b
#   make_llamacpp_ref.sh NAME --fa-compare
#       runs once with -fa off and once with -fa on (into a temp dir) and
#       prints how often llama.cpp disagrees with itself (MS_FA_KEEP=DIR keeps
#       the two files), and compares the committed default run with -fa on.
#
# Server: llama-server -m FILE -t 2 --port P --host 127.0.0.1 -c 2048 --no-repack [-fa X]
# (--no-repack: on this host the CPU extra buffer types (AMX/repack) crash the
# server at start-up with SIGILL/SIGSEGV; -c 2048 only bounds the KV cache.)
# Requests: see tests/ref/llamacpp_greedy.py. Needs tools/build-llamacpp.sh
# and tools/install-models.sh to have run; exits 77 when either is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
name=${1:?usage: make_llamacpp_ref.sh NAME [--fa on|off|auto] [--out FILE] | NAME --fa-compare}
shift
fa=""
out="$here/greedy_$name.json"
compare=false
while [ $# -gt 0 ]; do
  case "$1" in
    --fa) fa=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --fa-compare) compare=true; shift ;;
    *) echo "make_llamacpp_ref: unknown option $1" >&2; exit 2 ;;
  esac
done

bin=$("$root/tools/build-llamacpp.sh" --bin)
model=$("$root/tools/install-models.sh" --path "$name")
[ -x "$bin/llama-server" ] || { echo "make_llamacpp_ref: no llama-server in $bin" >&2; exit 77; }
[ -f "$model" ] || { echo "make_llamacpp_ref: no model file $model" >&2; exit 77; }

if $compare; then
  tmp=${MS_FA_KEEP:-$(mktemp -d)}
  [ -n "${MS_FA_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp"
  "$0" "$name" --fa off --out "$tmp/off.json"
  "$0" "$name" --fa on --out "$tmp/on.json"
  echo "== $name: -fa off vs -fa on"
  python3 "$root/tests/ref/llamacpp_greedy.py" compare "$tmp/off.json" "$tmp/on.json"
  if [ -f "$here/greedy_$name.json" ]; then
    echo "== $name: committed default (-fa auto) vs -fa on"
    python3 "$root/tests/ref/llamacpp_greedy.py" compare "$here/greedy_$name.json" "$tmp/on.json"
  fi
  exit 0
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
flags=(-t 2 --port "$port" --host 127.0.0.1 -c 2048 --no-repack)
[ -n "$fa" ] && flags+=(-fa "$fa")
log=$(mktemp /tmp/ms_llamacpp_ref.XXXXXX.log)
nice -n 10 "$bin/llama-server" -m "$model" "${flags[@]}" >"$log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap cleanup EXIT

url="http://127.0.0.1:$port"
for _ in $(seq 1 600); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "make_llamacpp_ref: llama-server exited; log:" >&2; tail -20 "$log" >&2; exit 1
  fi
  curl -sf "$url/health" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -sf "$url/health" >/dev/null || { echo "make_llamacpp_ref: server not healthy after 300 s" >&2; exit 1; }

flagstr="-m $(basename "$model") ${flags[*]}"
flagstr=${flagstr/--port $port/--port P}
fanote=""
[ -n "$fa" ] || fanote=" (no -fa: flash attention default = auto)"
python3 "$root/tests/ref/llamacpp_greedy.py" gen --url "$url" --name "$name" --file "$model" \
  --prompts "$here/greedy_prompts.json" --flags "$flagstr$fanote" --out "$out"
rm -f "$log"
echo "make_llamacpp_ref: wrote $out" >&2
