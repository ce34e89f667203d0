#!/usr/bin/env bash
# Acceptance 3: garbage on the link. (a) A stranger's DEALER sends the target's
# link endpoint random bytes, a truncated hello, another protocol version, an
# unknown message type, three frames, a tree for a request that does not
# exist, an oversized frame (over link.max_message_bytes), a hello with the
# wrong tokenizer and a matching hello (both refused: the healthy draft keeps
# its place, issue 15; test_cluster_hello checks the tokenizer refusal) and a stray tree: each gets an error reply or is dropped
# (itest-tool poke-target checks the replies), the target logs them, the real
# draft never leaves, and a normal request is then served correctly with
# speculation. (b) A fake target
# (a ROUTER at the draft's endpoint) sends a draft node garbage, another
# version, a verify for an unknown request and a tree: the draft answers with
# errors or drops, then serves a valid begin → tree → verify → tree exchange.
# The wire decoder's own fuzz target is fuzz_wire (tests/wire.cmake).
source "$(dirname "$0")/lib.sh"
it_init garbage
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
printf 'Once upon a time, there was a' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 48 "$WORK/ar.txt"

# ---- (a) the target's endpoint ---------------------------------------------------
C_MODEL=$STORIES C_PORT=$(it_port) C_LINK_EXTRA="max_message_bytes = 65536;"
it_config "$WORK/garbage.cfg"
MS_LOG=debug it_up "$WORK/garbage.cfg" garbage
draft_pid=$DRAFT_PID
tlog=$WORK/garbage-target.log
it_log "cluster up at $URL"
timeout 60 "$TOOL" poke-target "ipc://$WORK/link.sock" "$STORIES" 512 65536 || it_fail "poke-target: unexpected replies"

# Every bad message left a line in the target's log.
expect_log() { # expect_log PATTERN MIN WHAT
  local n
  n=$(grep -Ec "$1" "$tlog")
  if [ "$n" -lt "$2" ]; then it_fail "target log: $3: $n line(s) matching '$1', expected >= $2"; else echo "  log: $3: $n line(s)"; fi
}
expect_log 'ERROR .*wire: ' 4 "decode errors (random, truncated, version, type)"
expect_log 'more than two frames' 1 "three-frame message"
expect_log 'dropped tree from an unknown peer' 1 "tree from a stranger"
expect_log 'refused a second draft' 2 "the stranger's hellos (wrong tokenizer, matching)"
expect_log 'dropped tree from an unknown peer' 2 "the stray trees"

# The stranger never displaced the real draft: one join, the real one's.
joins=$(grep -c "draft joined: kind layerskip, pid" "$tlog")
[ "$joins" = 1 ] && grep -q "draft joined: kind layerskip, pid $draft_pid," "$tlog" ||
  it_fail "target log: $joins draft joins, expected only the real draft's (pid $draft_pid)"
it_wait_health "$URL" '"draft":"up"' 10 || it_fail "the draft is not up after the garbage"
kill -0 "$draft_pid" 2>/dev/null || it_fail "the draft node died"
kill -0 "$TARGET_PID" 2>/dev/null || it_die "the target node died"

"$TOOL" body completions "$WORK/prompt.txt" 48 0 >"$WORK/req.body"
code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/req.json")
[ "$code" = 200 ] || it_die "request after the garbage: HTTP $code: $(head -c 300 "$WORK/req.json")"
"$TOOL" text "$WORK/req.json" "$WORK/req.txt"
it_same "request after the garbage" "$WORK/ar.txt" "$WORK/req.txt"
mapfile -t st < <("$TOOL" get "$WORK/req.json" microspec.spec_rounds microspec.draft_failed)
it_log "request after the garbage: spec_rounds ${st[0]}, draft_failed ${st[1]}"
[ "${st[0]}" -gt 0 ] || it_fail "no speculation after the garbage"
[ "${st[1]}" = false ] || it_fail "draft_failed after the garbage"
it_stop "$DRAFT_PID"
it_stop "$TARGET_PID"

# ---- (b) the draft node against a fake target ----------------------------------------
C_ENDPOINT=ipc://$WORK/fake.sock C_PORT=$(it_port)
it_config "$WORK/fake.cfg"
timeout 90 "$TOOL" fake-target "ipc://$WORK/fake.sock" "$WORK/fake.ready" >"$WORK/fake.out" 2>&1 &
fake_pid=$!
IT_PIDS+=("$fake_pid")
deadline=$((SECONDS + 10))
until [ -f "$WORK/fake.ready" ] || [ $SECONDS -ge $deadline ]; do sleep 0.02; done
[ -f "$WORK/fake.ready" ] || it_die "the fake target did not bind"
it_start_draft "$WORK/fake.cfg" "$WORK/fake-draft.log"
wait "$fake_pid"
rc=$?
cat "$WORK/fake.out"
[ "$rc" = 0 ] || it_fail "fake target: the draft's replies were not as expected (exit $rc)"
kill -0 "$DRAFT_PID" 2>/dev/null || it_fail "the draft node died under garbage"
dlog=$WORK/fake-draft.log
grep -Eq 'ERROR .*wire: ' "$dlog" || it_fail "draft log: no decode error line"
grep -q 'ignored an unexpected tree' "$dlog" || it_fail "draft log: the stray tree left no line"
it_finish
