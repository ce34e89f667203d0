#!/usr/bin/env bash
# stories260K converted by convert-llama2c and run by microspec-generate,
# greedy from BOS + "Once upon a time" for 256 positions, must reproduce the
# output of llama2.c's run.c byte for byte (../shared golden file). The bf16
# conversion changes the numbers, so its ids are checked instead against the
# double-precision reference on the same bf16 weights (ref-greedy-check:
# each id the reference's argmax or within a near tie of it).
set -u
build=$1 shared=$2
src=$shared/models/stories260k
[ -f "$src/stories260K.bin" ] || { echo "SKIP: $src absent"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/tools/convert-llama2c" "$src/stories260K.bin" "$src/tok512.bin" "$work/model" || exit 1
for dtype in f32 bf16; do
  [ "$dtype" = f32 ] || { "$build/tools/convert-llama2c" "$src/stories260K.bin" "$src/tok512.bin" "$work/m16" --dtype bf16 || exit 1; }
  dir=$work/model; [ "$dtype" = f32 ] || dir=$work/m16
  "$build/tools/microspec-generate" --model "$dir" --prompt "Once upon a time" --steps 256 --echo \
    --ids-out "$work/ids.jsonl" >"$work/out.txt" 2>"$work/err.txt" || { cat "$work/err.txt"; exit 1; }
  if [ "$dtype" = f32 ]; then
    if cmp -s "$work/out.txt" "$src/golden_once_upon_a_time_t0_n256.txt"; then
      echo "golden: byte-identical ($(wc -c <"$work/out.txt") bytes)"; cat "$work/err.txt"
    else
      echo "golden: MISMATCH"; diff <(fold -w 80 "$src/golden_once_upon_a_time_t0_n256.txt") <(fold -w 80 "$work/out.txt") | head -20
      exit 1
    fi
  else
    "$build/tests/ref-greedy-check" "$dir" "$work/ids.jsonl" || { echo "bf16: ids differ from the reference"; exit 1; }
  fi
done
exit 0
