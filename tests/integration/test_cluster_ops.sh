#!/usr/bin/env bash
# Issue 15, acceptance 1 and 2, against the real nodes on loopback.
# (1) Overload: 200 silent and 50 trickling connections (itest-tool flood)
#     while a normal client is answered (the autoregressive text) or refused
#     with 503, /health keeps answering, and every flood connection is closed
#     by the server within http.header_timeout_s (+ slack for the reaper's
#     100 ms slice and a loaded machine), the silent ones with a 408.
# (2) A prompt longer than the context → 400 context_length_exceeded with the
#     numbers; temperature 1 with top_p 1e-46 (0.0f in float) == the greedy
#     text; http.request_timeout_s stops a request (the draft frozen with
#     SIGSTOP makes the first round wait link.deadline_ms, 40 s > 20 s):
#     finish_reason "timeout"; log.dir: the log lands there, a missing folder
#     stops the node at start; http.listen: microspec-config --check and the
#     target agree on localhost, 127.0.0.1, ::1 and a host name.
source "$(dirname "$0")/lib.sh"
it_init ops
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
HEADER_S=3
printf 'Once upon a time' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 64 "$WORK/ar.txt"
"$TOOL" body completions "$WORK/prompt.txt" 64 0 >"$WORK/req.body"

# The request timeout (20 s) is far above a normal request's time, even under
# ASan with the flood beside another test (5 s was not: on a slow 2-core VM a
# 64-token request of the ASan build was cut mid-text, 2026-11-26), and far
# below the frozen draft's link deadline (40 s).
C_MODEL=$STORIES C_PORT=$(it_port) C_DEADLINE=40000
C_HTTP_EXTRA="header_timeout_s = $HEADER_S; request_timeout_s = 20;"
it_config "$WORK/ops.cfg"
it_up "$WORK/ops.cfg" ops
port=${URL##*:}

# ---- (1) idle and trickling connections ---------------------------------------------
"$TOOL" flood 127.0.0.1 "$port" 200 50 30 "$WORK/flood.ready" >"$WORK/flood.out" 2>"$WORK/flood.err" &
flood=$!
IT_PIDS+=("$flood")
for _ in $(seq 1 200); do [ -f "$WORK/flood.ready" ] || sleep 0.05; done
[ -f "$WORK/flood.ready" ] || it_die "the flood did not open its connections: $(cat "$WORK/flood.err")"
health_ok=0
for i in 1 2 3; do
  code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$URL/health")
  [ "$code" = 200 ] && health_ok=$((health_ok + 1))
done
[ "$health_ok" = 3 ] || it_fail "/health during the flood: $health_ok of 3 answered 200"
code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/flood-req.json")
case "$code" in
  200) it_text_same "request during the flood" "$WORK/ar.txt" "$WORK/flood-req.json" "$WORK/flood-req.txt" ;;
  503) "$TOOL" get "$WORK/flood-req.json" error.message >/dev/null || it_fail "503 without a JSON error" ;;
  *) it_fail "request during the flood: HTTP $code (000: reset or no answer)" ;;
esac
wait "$flood" || it_fail "itest-tool flood failed: $(cat "$WORK/flood.err")"
cat "$WORK/flood.out"
val() { awk -F= -v k="$1" '$1 == k { print $2 }' "$WORK/flood.out"; }
[ "$(val idle_closed)" = 200 ] || it_fail "$(val idle_closed) of 200 silent connections closed by the server"
[ "$(val trickle_closed)" = 50 ] || it_fail "$(val trickle_closed) of 50 trickling connections closed by the server"
[ "$(val idle_408)" = 200 ] || it_fail "$(val idle_408) of 200 silent connections got a 408"
awk -v t="$(val trickle_longest_s)" -v h=$HEADER_S 'BEGIN { exit !(t != "" && t <= h + 3) }' ||
  it_fail "a trickling connection stayed open $(val trickle_longest_s) s; header timeout ${HEADER_S} s"
code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$URL/health")
[ "$code" = 200 ] || it_fail "/health after the flood: $code"

# ---- (2a) a prompt longer than the context -----------------------------------------------
for _ in $(seq 1 150); do printf 'Once upon a time, '; done >"$WORK/long.txt"
"$TOOL" body completions "$WORK/long.txt" 8 0 >"$WORK/long.body"
code=$(it_post "$URL" /v1/completions "$WORK/long.body" "$WORK/long.json")
[ "$code" = 400 ] || it_fail "long prompt: HTTP $code, expected 400 ($(head -c 300 "$WORK/long.json"))"
[ "$("$TOOL" get "$WORK/long.json" error.code)" = context_length_exceeded ] || it_fail "long prompt: no context_length_exceeded code"
msg=$("$TOOL" get "$WORK/long.json" error.message)
n_prompt=$(grep -oE 'resulted in [0-9]+ tokens' <<<"$msg" | grep -oE '[0-9]+')
grep -q 'maximum context length is 512 tokens' <<<"$msg" && [ "${n_prompt:-0}" -gt 512 ] ||
  it_fail "long prompt: the message lacks the numbers: $msg"

# ---- (2b) top_p below the smallest float == greedy ----------------------------------------
cat >"$WORK/tiny.body" <<'EOF'
{"prompt": "Once upon a time", "max_tokens": 64, "temperature": 1.0, "top_p": 1e-46, "seed": 7}
EOF
code=$(it_post "$URL" /v1/completions "$WORK/tiny.body" "$WORK/tiny.json")
[ "$code" = 200 ] || it_fail "tiny top_p: HTTP $code"
it_text_same "temperature 1, top_p 1e-46" "$WORK/ar.txt" "$WORK/tiny.json" "$WORK/tiny.txt"

# ---- (2c) http.request_timeout_s = 20 ----------------------------------------------------
kill -STOP "$DRAFT_PID"
code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/timeout.json")
kill -CONT "$DRAFT_PID"
[ "$code" = 200 ] || it_fail "request timeout: HTTP $code"
fin=$("$TOOL" get "$WORK/timeout.json" choices.0.finish_reason)
why=$("$TOOL" get "$WORK/timeout.json" microspec.stop_reason)
got=$("$TOOL" get "$WORK/timeout.json" usage.completion_tokens)
[ "$fin" = timeout ] && [ "$why" = "request timeout" ] && [ "${got:-64}" -lt 64 ] ||
  it_fail "request timeout: finish_reason '$fin', stop_reason '$why', $got of 64 tokens"
it_stop "$DRAFT_PID"
it_stop "$TARGET_PID"

# ---- (2d) log.dir, (2e) http.listen ------------------------------------------------------
solo() { # solo FILE LISTEN LOGDIR — a target without a draft
  cat >"$1" <<EOF
target = { model = "$STORIES"; max_ctx = 512; threads = 1; };
draft = { enabled = false; };
http = { listen = "$2"; port = $(it_port); };
log = { level = "info"; dir = "$3"; };
EOF
}
# start_solo CFG LOG → 0 when /health answered on the listen address, 1 when the node exited
start_solo() {
  local cfg=$1 log=$2 host port i
  host=$("$MS_BUILD_DIR/tools/microspec-config" "$cfg" --get http.listen)
  port=$("$MS_BUILD_DIR/tools/microspec-config" "$cfg" --get http.port)
  case "$host" in localhost) host=127.0.0.1 ;; *:*) host="[$host]" ;; esac
  it_start_target "$cfg" "$log"
  for i in $(seq 1 600); do
    curl -s -m 2 -o /dev/null "http://$host:$port/health" && return 0
    kill -0 "$TARGET_PID" 2>/dev/null || return 1
    sleep 0.05
  done
  return 2
}
mkdir -p "$WORK/logs"
solo "$WORK/logdir.cfg" 127.0.0.1 "$WORK/logs"
start_solo "$WORK/logdir.cfg" "$WORK/logdir-stderr.log" || it_fail "log.dir = an existing folder: the target did not come up"
grep -q 'http: listening on' "$WORK/logs/microspec-target.log" 2>/dev/null ||
  it_fail "log.dir: no 'listening' line in $WORK/logs/microspec-target.log"
grep -q 'http: listening on' "$WORK/logdir-stderr.log" && it_fail "log.dir: the log still goes to stderr"
it_stop "$TARGET_PID"
solo "$WORK/badlog.cfg" 127.0.0.1 "$WORK/no/such/folder"
start_solo "$WORK/badlog.cfg" "$WORK/badlog-stderr.log"
rc=$?
[ "$rc" = 1 ] || it_fail "log.dir = a missing folder: the target did not refuse to start (rc $rc)"
grep -q 'log.dir' "$WORK/badlog-stderr.log" || it_fail "log.dir = a missing folder: no message naming log.dir"
it_stop "$TARGET_PID"

for listen in localhost 127.0.0.1 ::1 no-such-host.invalid; do
  solo "$WORK/listen.cfg" "$listen" ""
  if "$MS_BUILD_DIR/tools/microspec-config" "$WORK/listen.cfg" --check >/dev/null 2>&1; then check=0; else check=1; fi
  start_solo "$WORK/listen.cfg" "$WORK/listen-$listen.log"
  node=$?
  it_stop "$TARGET_PID"
  if [ "$listen" = ::1 ] && [ "$node" != 0 ] && grep -q 'Cannot assign requested address\|cannot listen' "$WORK/listen-$listen.log"; then
    it_log "no IPv6 loopback here: ::1 skipped"
    continue
  fi
  it_log "http.listen = \"$listen\": --check $([ $check = 0 ] && echo accepts || echo refuses), the target $([ $node = 0 ] && echo serves || echo refuses)"
  [ "$check" = "$node" ] || it_fail "http.listen = \"$listen\": microspec-config --check and the target disagree"
done
[ "$(cat "$WORK"/listen-localhost.log | grep -c 'listening on 127.0.0.1')" -ge 1 ] || it_fail "localhost did not bind 127.0.0.1"
it_finish
