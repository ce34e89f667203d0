#!/usr/bin/env bash
# Acceptance 7: streaming and statistics. `curl -N` with "stream": true on
# /v1/completions and /v1/chat/completions: the concatenated deltas equal the
# non-streamed text, the stream ends with `data: [DONE]`, and the final chunk
# carries finish_reason and the `microspec` object. The microspec statistics
# of a greedy request (rounds, spec_rounds, mean accepted length, vocabulary
# mean/max, coverage, draft_failed) equal microspec-generate's single-process
# numbers for the same prompt and draft settings (--prompts-jsonl/--stats-out).
# stories260K has no chat template, so a chat turn is the same text as the
# completion prompt: the chat answers must equal the completion answers too.
source "$(dirname "$0")/lib.sh"
it_init stream
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin data/spec_bench/question.jsonl
it_stories
n_tok=48
jsonl=$MS_SHARED_DIR/data/spec_bench/question.jsonl
line=${ITEST_STREAM_LINE:-3}  # a Spec-Bench question (1-based line)
sed -n "${line}p" "$jsonl" >"$WORK/one.jsonl"
mkdir -p "$WORK/p"
"$TOOL" prompts "$WORK/one.jsonl" 1 "$WORK/p" || it_die "reading the prompt"
prompt=$WORK/p/p00.txt
it_ar "$STORIES" "$prompt" "$n_tok" "$WORK/ar.txt"
# Single-process speculative run with the cluster's draft settings (it_config's defaults).
"$GEN" --model "$STORIES" --prompts-jsonl "$WORK/one.jsonl" --stats-out "$WORK/gen-stats.jsonl" --quiet -n "$n_tok" \
  --draft-kind layerskip --draft-layers 1 --vocab dynamic --w-max 256 --k-pre 3 --k-ver 3 \
  --tree-k 8 --tree-depth 4 --tree-total 32 --draft-policy all >"$WORK/gen.out" 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; it_die "generate failed"; }
[ "$(wc -l <"$WORK/gen-stats.jsonl")" -le 1 ] && [ -s "$WORK/gen-stats.jsonl" ] || it_die "expected one stats line"

C_MODEL=$STORIES C_PORT=$(it_port)
it_config "$WORK/stream.cfg"
it_up "$WORK/stream.cfg" stream
it_log "cluster up at $URL"

for api in completions chat; do
  path=/v1/completions; [ $api = chat ] && path=/v1/chat/completions
  "$TOOL" body $api "$prompt" $n_tok 0 >"$WORK/$api.body"
  "$TOOL" body $api "$prompt" $n_tok 1 >"$WORK/$api-s.body"
  code=$(it_post "$URL" $path "$WORK/$api.body" "$WORK/$api.json")
  [ "$code" = 200 ] || { it_fail "$api: HTTP $code: $(head -c 300 "$WORK/$api.json")"; continue; }
  "$TOOL" text "$WORK/$api.json" "$WORK/$api.txt" || { it_fail "$api: no text"; continue; }
  curl -sN -m 60 -H 'Content-Type: application/json' --data-binary @"$WORK/$api-s.body" "$URL$path" >"$WORK/$api.sse" ||
    it_fail "$api stream: curl exit $?"
  if ! "$TOOL" sse "$WORK/$api.sse" "$WORK/$api-s.txt" "$WORK/$api-final.json"; then
    it_fail "$api stream: malformed"; continue
  fi
  [ "$(tr -d '\r' <"$WORK/$api.sse" | grep -v '^$' | tail -n 1)" = "data: [DONE]" ] || it_fail "$api stream: last line is not data: [DONE]"
  deltas=$(grep -c '^data: {' "$WORK/$api.sse")
  [ "$deltas" -ge 3 ] || it_fail "$api stream: only $deltas chunks (not streamed?)"
  it_same "$api: streamed deltas vs non-streamed" "$WORK/$api.txt" "$WORK/$api-s.txt"
  it_same "$api: non-streamed vs autoregressive" "$WORK/ar.txt" "$WORK/$api.txt"
  [ "$api" = chat ] || ! grep -q '"chat.completion.chunk"' "$WORK/$api.sse" || it_fail "completions stream uses chat chunks"
  [ "$api" = completions ] || grep -q '"chat.completion.chunk"' "$WORK/$api.sse" || it_fail "chat stream: no chat.completion.chunk objects"
  echo "$api, non-streamed vs single-process statistics:"
  "$TOOL" stats-eq "$WORK/$api.json" "$WORK/gen-stats.jsonl" || it_fail "$api: statistics differ from the single-process run"
  echo "$api, streamed final chunk vs single-process statistics:"
  "$TOOL" stats-eq "$WORK/$api-final.json" "$WORK/gen-stats.jsonl" || it_fail "$api stream: statistics differ"
  it_log "$api: $deltas chunks, $(wc -c <"$WORK/$api-s.txt") bytes"
done
it_same "chat answer vs completion answer (no chat template)" "$WORK/completions.txt" "$WORK/chat.txt"
sr=$("$TOOL" get "$WORK/completions.json" microspec.spec_rounds)
[ "$sr" -gt 0 ] || it_fail "no speculation (spec_rounds $sr)"
it_finish
