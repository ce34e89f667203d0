#!/usr/bin/env bash
# Runs the README's "Using the engine" block as written, so the commands a new
# user copies keep working: the fenced sh block is cut out of README.md,
# `build/release/` becomes BUILD_DIR, `build/out` a temporary folder, and the
# block runs under `set -euo pipefail` from the repository root. Every command
# must exit 0 and every microspec-generate must print text or statistics.
# The one line that builds llama.cpp (~9 min) is skipped, and said so.
#
#   test_readme_examples.sh BUILD_DIR
#
# Needs the three real models (tools/install-models.sh; exit 77 when pip
# cannot reach them, its exit 3; any other install failure fails) and ../shared (exit 77 without it).
set -euo pipefail
build=$(cd "${1:?usage: test_readme_examples.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
[ -d ../shared/corpus ] || { echo "SKIP: ../shared is not beside the repository"; exit 77; }
for m in qwen2.5-coder-1.5b qwen2.5-coder-0.5b gemma3-270m; do
  rc=0
  bash tools/install-models.sh "$m" >&2 || rc=$?
  [ "$rc" != 3 ] || { echo "SKIP: $m cannot be installed (pip cannot reach its packages)"; exit 77; }
  [ "$rc" = 0 ] || { echo "FAIL: tools/install-models.sh $m: exit $rc"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The block: from the fence after "## Using the engine" to the next fence.
awk '/^## Using the engine/ {s=1; next} s==1 && /^```sh/ {s=2; next} s==2 && /^```/ {exit} s==2 {print}' README.md \
  >"$tmp/block.sh"
n=$(grep -c . "$tmp/block.sh" || true)
[ "$n" -ge 10 ] || { echo "FAIL: README.md's 'Using the engine' block not found (or shorter than 10 lines)"; exit 1; }
grep -n 'build-llamacpp.sh' "$tmp/block.sh" | sed 's/^/skipped (builds llama.cpp, ~9 min): line /' || true
{
  echo 'set -euo pipefail'
  echo 'set -x'
  sed -e '/build-llamacpp\.sh/d' -e "s#build/release/#$build/#g" -e "s#build/out#$tmp/out#g" "$tmp/block.sh"
} >"$tmp/run.sh"
if ! bash "$tmp/run.sh" >"$tmp/stdout" 2>"$tmp/stderr"; then
  echo "FAIL: the README block stopped; the last commands and messages:"
  tail -n 25 "$tmp/stderr"
  exit 1
fi
gens=$(grep -c 'microspec-generate' "$tmp/stderr" || true)
stats=$(grep -c 'prompt tokens:' "$tmp/stderr" || true)
# one statistics line per generate call at least (the Spec-Bench call prints one per prompt)
if [ "$stats" -lt "$gens" ] || [ "$gens" -lt 6 ]; then
  echo "FAIL: $gens generate commands ran but $stats statistics lines were printed"
  tail -n 25 "$tmp/stderr"
  exit 1
fi
grep -q 'mean accepted length' "$tmp/stderr" || { echo "FAIL: no speculative run printed its acceptance"; exit 1; }
[ -s "$tmp/out/qwen.list" ] && [ -s "$tmp/out/stats.jsonl" ] || { echo "FAIL: the list or the stats file is missing"; exit 1; }
echo "test_readme_examples: $(grep -c '^+ ' "$tmp/stderr") commands of README.md's 'Using the engine' block ran," \
  "$gens generate calls, all exited 0"
