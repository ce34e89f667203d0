#!/usr/bin/env bash
# Acceptance 2: the draft node is killed (SIGKILL) in the middle of a long
# greedy streaming request. The response must still be exactly the target's
# autoregressive output and report draft_failed; /health turns "draft":"down";
# the same draft restarted is admitted again ("up") and the next request
# speculates again; the target is never restarted (same pid throughout).
source "$(dirname "$0")/lib.sh"
it_init kill
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
n_long=${ITEST_LONG_TOKENS:-400}
printf 'Once upon a time' >"$WORK/prompt.txt"
printf 'The little dog' >"$WORK/prompt2.txt"
it_ar "$STORIES" "$WORK/prompt.txt" "$n_long" "$WORK/ar-long.txt"
it_ar "$STORIES" "$WORK/prompt2.txt" 48 "$WORK/ar-short.txt"

C_MODEL=$STORIES C_PORT=$(it_port)
it_config "$WORK/kill.cfg"
it_up "$WORK/kill.cfg" kill
target_pid=$TARGET_PID
joins0=$(grep -o "\"draft_joins\":[0-9]*" <<<"$HEALTH" | cut -d: -f2)
it_log "cluster up at $URL (target pid $target_pid, draft pid $DRAFT_PID)"

# The long request, streamed; kill the draft once 3 chunks arrived: the first
# comes from the prefill, later ones from verified rounds, so speculation has
# happened before the kill even on a slow (sanitizer) build.
"$TOOL" body completions "$WORK/prompt.txt" "$n_long" 1 >"$WORK/long.body"
curl -sN -m 120 -H 'Content-Type: application/json' --data-binary @"$WORK/long.body" \
  "$URL/v1/completions" >"$WORK/long.sse" 2>"$WORK/long.curl.err" &
curl_pid=$!
IT_PIDS+=("$curl_pid")
deadline=$((SECONDS + 30))
chunks() { local c; c=$(grep -c '^data: ' "$WORK/long.sse" 2>/dev/null); echo "${c:-0}"; }
until [ "$(chunks)" -ge 3 ] || [ $SECONDS -ge $deadline ]; do sleep 0.01; done
[ "$(chunks)" -ge 3 ] || it_die "fewer than 3 streamed chunks within 30 s"
kill -KILL "$DRAFT_PID"
wait "$DRAFT_PID" 2>/dev/null
it_log "draft killed after $(grep -c '^data: ' "$WORK/long.sse") chunk(s)"
wait "$curl_pid" || it_fail "curl exited with $?"
if grep -q 'data: \[DONE\]' <<<"$(tail -n 3 "$WORK/long.sse")" && [ "$(grep -c '^data: ' "$WORK/long.sse")" -lt 3 ]; then
  it_fail "the stream ended almost at once"
fi
"$TOOL" sse "$WORK/long.sse" "$WORK/long.txt" "$WORK/long.final.json" || it_die "bad stream"
it_same "long request across the kill" "$WORK/ar-long.txt" "$WORK/long.txt"
mapfile -t st < <("$TOOL" get "$WORK/long.final.json" microspec.draft_failed microspec.spec_rounds usage.completion_tokens)
it_log "long request: draft_failed ${st[0]}, spec_rounds ${st[1]}, tokens ${st[2]}"
[ "${st[0]}" = true ] || it_fail "draft_failed is ${st[0]}, expected true (the draft was killed mid-request)"
[ "${st[1]}" -gt 0 ] || it_fail "no speculative round before the kill"

it_wait_health "$URL" '"draft":"down"' 10 || it_fail "/health did not report the draft down"
it_log "health after the kill: $HEALTH"

it_start_draft "$WORK/kill.cfg" "$WORK/kill-draft2.log"
it_wait_health "$URL" '"draft":"up"' 30 || it_fail "the restarted draft was not admitted"
it_log "health after the restart: $HEALTH"

"$TOOL" body completions "$WORK/prompt2.txt" 48 0 >"$WORK/short.body"
code=$(it_post "$URL" /v1/completions "$WORK/short.body" "$WORK/short.json")
[ "$code" = 200 ] || it_die "request after the restart: HTTP $code"
"$TOOL" text "$WORK/short.json" "$WORK/short.txt"
it_same "request after the restart" "$WORK/ar-short.txt" "$WORK/short.txt"
mapfile -t st < <("$TOOL" get "$WORK/short.json" microspec.spec_rounds microspec.draft_failed)
[ "${st[0]}" -gt 0 ] || it_fail "no speculation after the draft restarted (spec_rounds ${st[0]})"
[ "${st[1]}" = false ] || it_fail "draft_failed ${st[1]} after the restart"

# ---- a draft that stalls (SIGSTOP) past the deadline mid-request ----------------------
"$TOOL" body completions "$WORK/prompt.txt" "$n_long" 1 >"$WORK/stall.body"
curl -sN -m 120 -H "Content-Type: application/json" --data-binary @"$WORK/stall.body" \
  "$URL/v1/completions" >"$WORK/stall.sse" 2>/dev/null &
curl_pid=$!
IT_PIDS+=("$curl_pid")
deadline=$((SECONDS + 30))
until grep -q "^data: " "$WORK/stall.sse" 2>/dev/null || [ $SECONDS -ge $deadline ]; do sleep 0.01; done
kill -STOP "$DRAFT_PID"
wait "$curl_pid" || it_fail "stalled-draft request: curl exited with $?"
kill -CONT "$DRAFT_PID"
"$TOOL" sse "$WORK/stall.sse" "$WORK/stall.txt" "$WORK/stall.final.json" || it_die "bad stream (stalled draft)"
it_same "long request with a stalled draft" "$WORK/ar-long.txt" "$WORK/stall.txt"
mapfile -t st < <("$TOOL" get "$WORK/stall.final.json" microspec.draft_failed microspec.spec_rounds)
it_log "stalled draft: draft_failed ${st[0]}, spec_rounds ${st[1]}"
[ "${st[0]}" = true ] || it_fail "draft_failed is ${st[0]} with a draft stalled past the deadline"
# Resumed, the same draft process finds its way back by itself.
it_wait_health "$URL" '"draft":"up"' 30 || it_fail "the resumed draft was not admitted again"
code=$(it_post "$URL" /v1/completions "$WORK/short.body" "$WORK/short2.json")
[ "$code" = 200 ] || it_die "request after the stall: HTTP $code"
"$TOOL" text "$WORK/short2.json" "$WORK/short2.txt"
it_same "request after the stall" "$WORK/ar-short.txt" "$WORK/short2.txt"
sr=$("$TOOL" get "$WORK/short2.json" microspec.spec_rounds)
[ "$sr" -gt 0 ] || it_fail "no speculation after the draft resumed (spec_rounds $sr)"

kill -0 "$target_pid" 2>/dev/null || it_fail "the target died"
[ "$TARGET_PID" = "$target_pid" ] || it_fail "the target was restarted"
[ "$(grep -c 'target.*serving http' "$WORK/kill-target.log")" = 1 ] || it_fail "the target log shows a restart"
metrics=$(curl -s -m 5 "$URL/metrics")
joins=$(grep "^microspec_draft_joins_total " <<<"$metrics" | cut -d" " -f2)
[ "${joins:-0}" -gt "$joins0" ] || it_fail "draft joins ${joins:-?} after the restart, $joins0 before"
grep -q "^microspec_draft_failures_total 2$" <<<"$metrics" || it_fail "draft failures: $(grep failures_total <<<"$metrics" | tail -1), expected 2"
it_finish
