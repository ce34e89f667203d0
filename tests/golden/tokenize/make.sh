#!/usr/bin/env bash
# Regenerates the llama.cpp golden token ids used by tests/test_tokenizer_gguf.c.
#
#   tests/golden/tokenize/make.sh        (needs tools/install-models.sh models,
#                                         tools/build-llamacpp.sh binaries, python3)
#
# For each model, every text is written verbatim to a file and tokenized by
#   llama-tokenize -m MODEL.gguf -f TEXT --ids --no-bos --no-escape --no-parse-special --log-disable
# (raw text: no BOS, no escape processing, special tokens not parsed). Outputs:
#   NAME.vectors.txt     the 46 strings of tokenizers/vectors/ggml-vocab-qwen2.gguf.inp:
#                        "index<TAB>[id, id, ...]" (llama-tokenize's --ids line)
#   NAME.spec_bench.txt  spec_bench/question.jsonl, row r, turn k (0, 1):
#                        "r.k count sha256" — sha256 of the --ids line without its newline
#   NAME.human_eval.txt  human_eval/question.jsonl, row r, field "prompt": "r count sha256"
#   NAME.bos.txt         the ids of "Hello" WITH the model's own BOS rule (no --no-bos)
# and README.md recording the command, the llama.cpp version and the date.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
shared=${MS_SHARED_DIR:-$(cd "$root/.." && pwd)/shared}
bin=$("$root/tools/build-llamacpp.sh" --bin)
tok="$bin/llama-tokenize"
[ -x "$tok" ] || { echo "make.sh: $tok is missing (run tools/build-llamacpp.sh)" >&2; exit 1; }
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Split the inputs into one file per text (names are the indices above).
python3 - "$shared" "$work" <<'EOF'
import json, os, sys
shared, work = sys.argv[1], sys.argv[2]
def put(d, name, text):
    os.makedirs(os.path.join(work, d), exist_ok=True)
    with open(os.path.join(work, d, name), "wb") as f:
        f.write(text.encode("utf-8"))
raw = open(os.path.join(shared, "tokenizers/vectors/ggml-vocab-qwen2.gguf.inp"), "rb").read().decode("utf-8")
vec = raw.split("\n__ggml_vocab_test__\n")
if vec and vec[-1] == "":
    vec.pop()
assert len(vec) == 46, len(vec)  # the .inp ends with a separator
for i, s in enumerate(vec):
    put("vectors", str(i), s)
for r, line in enumerate(open(os.path.join(shared, "data/spec_bench/question.jsonl"), encoding="utf-8")):
    for k, t in enumerate(json.loads(line)["turns"][:2]):
        put("spec_bench", "%d.%d" % (r, k), t)
for r, line in enumerate(open(os.path.join(shared, "data/human_eval/question.jsonl"), encoding="utf-8")):
    put("human_eval", str(r), json.loads(line)["prompt"])
EOF

run() { "$tok" -m "$1" -f "$2" --ids --no-escape --no-parse-special --log-disable "${@:3}" 2>/dev/null; }

for name in gemma3-270m qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do
  model=$("$root/tools/install-models.sh" --path "$name")
  [ -f "$model" ] || { echo "make.sh: $model is missing (tools/install-models.sh $name)" >&2; exit 1; }
  echo "make.sh: $name" >&2
  out="$here/$name.vectors.txt"; : >"$out.tmp"
  for i in $(seq 0 45); do printf '%d\t%s\n' "$i" "$(run "$model" "$work/vectors/$i" --no-bos)" >>"$out.tmp"; done
  mv "$out.tmp" "$out"
  for set in spec_bench human_eval; do
    out="$here/$name.$set.txt"; : >"$out.tmp"
    for f in $(ls "$work/$set" | sort -t. -k1,1n -k2,2n); do
      ids=$(run "$model" "$work/$set/$f" --no-bos)
      if [ "$ids" = "[]" ]; then n=0; else n=$(($(printf '%s' "$ids" | tr -cd ',' | wc -c) + 1)); fi
      printf '%s %d %s\n' "$f" "$n" "$(printf '%s' "$ids" | sha256sum | cut -d' ' -f1)" >>"$out.tmp"
    done
    mv "$out.tmp" "$out"
  done
  printf 'Hello' >"$work/hello"
  run "$model" "$work/hello" >"$here/$name.bos.txt"
done

cat >"$here/README.md" <<EOF
# llama.cpp golden token ids

Made by \`tests/golden/tokenize/make.sh\` on $(date -u +%Y-%m-%d) with llama-tokenize from
llama-cpp-python 0.3.36 (vendored llama.cpp commit 0c1e57098, built by tools/build-llamacpp.sh;
\`llama-tokenize --version\`: $("$tok" --version 2>&1 | head -1)).

Command, once per text (each text written verbatim to a file):

    llama-tokenize -m MODEL.gguf -f TEXT --ids --no-bos --no-escape --no-parse-special --log-disable

Models (tools/install-models.sh): gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b.
Texts: the 46 strings of tokenizers/vectors/ggml-vocab-qwen2.gguf.inp (split on
"\\n__ggml_vocab_test__\\n") for every model; spec_bench/question.jsonl turns[0] and turns[1];
human_eval/question.jsonl "prompt".

Files per model NAME:
- NAME.vectors.txt: "index<TAB>[ids]" (the full --ids line).
- NAME.spec_bench.txt: "row.turn count sha256", NAME.human_eval.txt: "row count sha256";
  sha256 is of the --ids line without its newline, e.g. the bytes "[9707, 1879]".
- NAME.bos.txt: the --ids line of "Hello" with the model's own add_bos rule (no --no-bos).
EOF
echo "make.sh: done" >&2
