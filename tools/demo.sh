#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and
# generate text on the default model.
#
#   tools/demo.sh [--model DIR] [--prompt TEXT] [extra microspec-generate flags...]
#
# Default model: ../shared/models/stories260k (llama2.c format), converted once
# into an HF directory under build/models/. Without ../shared, pass --model DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

model=""
prompt="Once upon a time"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) extra+=("$1"); shift ;;
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

echo "demo: generating from $model" >&2
exec "$build/tools/microspec-generate" --model "$model" --prompt "$prompt" --echo --max-tokens 200 "${extra[@]}"
