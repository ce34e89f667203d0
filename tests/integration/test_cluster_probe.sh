#!/usr/bin/env bash
# Issue 35, acceptance 2: the probe campaign as one bounded test against a
# stories260K pair on loopback, the link authenticated by a secret.
#  (1) load: 64 clients for 10 s, keep-alive — every answer 200 with the
#      autoregressive text, or 503 with a JSON error; 0 resets, 0 other;
#  (2) slow bodies: 50 connections send a POST's headers and drip the body a
#      byte a second — each is closed (or 408) within http.header_timeout_s
#      (3 s) + slack, while legitimate requests are served meanwhile;
#  (3) 100 bad inputs (framing, headers, Host, Origin, JSON, fields,
#      endpoints) — each a 4xx in the API's JSON error shape, naming the field
#      where one applies (82 cases), one status line each; then a real request
#      is served;
#  (4) a link flood without the secret: 10,000 frames of random bytes from a
#      stranger's DEALER — the target's log grows by a bounded number of
#      lines, the real draft stays attached (one join), and a request is then
#      served with speculation and the autoregressive text.
# The probe driver is tests/integration/http_probe.py (python3, stdlib).
source "$(dirname "$0")/lib.sh"
it_init probe
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
command -v python3 >/dev/null || it_skip "python3 is not installed"
PROBE="python3 $MS_SOURCE_DIR/tests/integration/http_probe.py"
it_stories
printf 'Once upon a time, there was a' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 8 "$WORK/ar8.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 48 "$WORK/ar48.txt"
"$TOOL" body completions "$WORK/prompt.txt" 8 0 >"$WORK/req8.body"
"$TOOL" body completions "$WORK/prompt.txt" 48 0 >"$WORK/req48.body"
head -c 48 /dev/urandom | base64 >"$WORK/link.secret"
chmod 600 "$WORK/link.secret"

C_MODEL=$STORIES C_PORT=$(it_port) C_QUEUE=8
C_LINK_EXTRA="secret_file = \"$WORK/link.secret\";" C_HTTP_EXTRA="header_timeout_s = 3;"
it_config "$WORK/probe.cfg"
it_up "$WORK/probe.cfg" probe
port=${URL##*:}
tlog=$WORK/probe-target.log
grep -q 'listening on .* (link secret)' "$tlog" || it_fail "the target's link does not use the secret"
it_log "cluster up at $URL"
t0=$SECONDS

# run_probe NAME ARGS... — the driver's key=value lines into $WORK/NAME.out (and the log)
run_probe() {
  local name=$1
  shift
  timeout 120 $PROBE "$@" >"$WORK/$name.out" 2>&1
  local rc=$?
  sed 's/^/  /' "$WORK/$name.out"
  [ "$rc" = 0 ] || it_fail "$name probe failed (exit $rc)"
}
val() { awk -F= -v k="$2" '$1 == k { print $2 }' "$WORK/$1.out"; }

it_log "(1) load: 64 clients, 10 s"
run_probe load load "$port" 10 64 "$WORK/req8.body" "$WORK/ar8.txt"
it_log "(2) slow bodies: 50 clients"
run_probe slow slow "$port" 50 3 "$WORK/req8.body" "$WORK/ar8.txt"
it_log "(3) 100 bad inputs"
run_probe bad bad "$port" "$WORK/req8.body" "$WORK/ar8.txt"
kill -0 "$TARGET_PID" 2>/dev/null || it_die "the target died under the HTTP probes"

it_log "(4) link flood without the secret"
metric() { curl -s -m 5 "$URL/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
joins0=$(metric microspec_draft_joins_total)
lines0=$(wc -l <"$tlog")
bytes0=$(wc -c <"$tlog")
n_junk=10000
timeout 60 "$TOOL" junk "ipc://$WORK/link.sock" "$n_junk" || it_fail "the flood was not sent whole"
# Until the target's log is quiet for 2 s (bounded): it has read the frames.
deadline=$((SECONDS + 20)) last=-1 quiet=0
while [ $SECONDS -lt $deadline ] && [ $quiet -lt 4 ]; do
  cur=$(wc -c <"$tlog")
  if [ "$cur" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0; fi
  last=$cur
  sleep 0.5
done
code=$(it_post "$URL" /v1/completions "$WORK/req48.body" "$WORK/after.json")
[ "$code" = 200 ] || it_fail "request after the flood: HTTP $code: $(head -c 300 "$WORK/after.json")"
it_text_same "request after the flood" "$WORK/ar48.txt" "$WORK/after.json" "$WORK/after.txt"
mapfile -t st < <("$TOOL" get "$WORK/after.json" microspec.spec_rounds microspec.draft_failed)
[ "${st[0]:-0}" -gt 0 ] || it_fail "no speculation after the flood (spec_rounds ${st[0]:-?})"
[ "${st[1]:-}" = false ] || it_fail "draft_failed after the flood"
it_wait_health "$URL" '"draft":"up"' 10 || it_fail "the draft is not up after the flood"
joins1=$(metric microspec_draft_joins_total)
[ "$joins1" = "$joins0" ] || it_fail "draft joins $joins0 -> $joins1: the real draft left during the flood"
kill -0 "$DRAFT_PID" 2>/dev/null || it_fail "the draft node died"
grown_lines=$(($(wc -l <"$tlog") - lines0))
grown_bytes=$(($(wc -c <"$tlog") - bytes0))
it_stop "$TARGET_PID" # the link closes: the left-out frames are summarised
one_by_one=$(tail -n +"$((lines0 + 1))" "$tlog" | grep -c '(peer [0-9a-f]*)')
summarised=$(tail -n +"$((lines0 + 1))" "$tlog" | grep -o 'link: [0-9]* bad message(s)' | awk '{ s += $2 } END { print s + 0 }')
echo "  flood: $n_junk frames; target log +$grown_lines lines, +$grown_bytes bytes while served;" \
  "$one_by_one lines one by one + $summarised summarised at close"
[ "$grown_lines" -le 40 ] || it_fail "the flood grew the target's log by $grown_lines lines (bound 40)"
[ "$grown_bytes" -le 16384 ] || it_fail "the flood grew the target's log by $grown_bytes bytes (bound 16 KiB)"
[ "$one_by_one" -ge 1 ] || it_fail "the flood left no line at all in the target's log"
[ $((one_by_one + summarised)) -le "$n_junk" ] || it_fail "more bad frames counted than sent"
it_log "probe set: $((SECONDS - t0)) s"
echo "summary: load $(val load load_requests) requests ($(val load load_ok) ok, $(val load load_busy) 503," \
  "$(val load load_resets) resets); slow $(val slow slow_closed)/$(val slow slow_clients) closed" \
  "($(val slow slow_408) with 408, longest $(val slow slow_longest_s) s, $(val slow slow_legit_ok) served meanwhile);" \
  "bad $(val bad bad_answered)/$(val bad bad_cases) answered, $(val bad bad_named_field)/$(val bad bad_need_field) named the field;" \
  "flood +$grown_lines log lines"
it_finish
