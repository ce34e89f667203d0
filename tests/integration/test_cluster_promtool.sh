#!/usr/bin/env bash
# Issue 15: /metrics passes `promtool check metrics` (Debian's prometheus
# package; tools/install-deps.sh installs it) without a warning, on a real
# cluster after a served request (so the histograms, the link summary and the
# per-code counters all hold data) and on a fresh target without a draft
# (empty histograms, no link rounds). First promtool must reject a sample in
# the old form (microspec_link_round_us: an abbreviated unit), so a promtool
# that lints nothing cannot pass the test. Skipped (77) without promtool.
source "$(dirname "$0")/lib.sh"
command -v promtool >/dev/null || { echo "SKIP: promtool absent (Debian package prometheus; tools/install-deps.sh)"; exit 77; }
it_init promtool
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories

# check WHAT FILE — promtool accepts FILE with no output at all.
check() {
  local out rc
  out=$(promtool check metrics <"$2" 2>&1)
  rc=$?
  if [ "$rc" != 0 ] || [ -n "$out" ]; then
    it_fail "$1: promtool check metrics (exit $rc): $out"
  else
    it_log "$1: promtool: no problems in $(grep -c '^# TYPE' "$2") metric families"
  fi
}

printf '# HELP microspec_link_round_us Link cost.\n# TYPE microspec_link_round_us summary\nmicrospec_link_round_us{quantile="0.5"} 44.9\nmicrospec_link_round_us_sum 1\nmicrospec_link_round_us_count 1\n' >"$WORK/old.txt"
out=$(promtool check metrics <"$WORK/old.txt" 2>&1) && [ -z "$out" ] &&
  it_die "promtool accepts an abbreviated unit (microspec_link_round_us): it cannot judge this test"

# ---- a cluster that served a request --------------------------------------------------
printf 'Once upon a time' >"$WORK/prompt.txt"
"$TOOL" body completions "$WORK/prompt.txt" 24 0 >"$WORK/req.body"
"$TOOL" body chat "$WORK/prompt.txt" 8 1 >"$WORK/stream.body"
C_MODEL=$STORIES C_PORT=$(it_port)
it_config "$WORK/metrics.cfg"
it_up "$WORK/metrics.cfg" metrics
code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/req.json")
[ "$code" = 200 ] || it_fail "request: HTTP $code"
code=$(it_post "$URL" /v1/chat/completions "$WORK/stream.body" "$WORK/stream.sse")
[ "$code" = 200 ] || it_fail "streamed request: HTTP $code"
curl -s -m 10 "$URL/metrics" >"$WORK/cluster.txt" || it_fail "no /metrics"
check "cluster after requests" "$WORK/cluster.txt"
n=$(sed -nE 's/^microspec_link_round_seconds_count ([0-9]+)$/\1/p' "$WORK/cluster.txt")
[ "${n:-0}" -gt 0 ] || it_fail "microspec_link_round_seconds_count is '${n:-absent}' after a speculative request"
grep -q '_us[{ ]' "$WORK/cluster.txt" && it_fail "a metric still in microseconds: $(grep -m1 '_us[{ ]' "$WORK/cluster.txt")"
it_stop "$DRAFT_PID"
it_stop "$TARGET_PID"

# ---- a fresh target without a draft ----------------------------------------------------
cat >"$WORK/alone.cfg" <<EOF
target = { model = "$STORIES"; max_ctx = 512; threads = 1; };
draft = { enabled = false; };
http = { listen = "127.0.0.1"; port = $(it_port); };
EOF
URL=http://127.0.0.1:$("$MS_BUILD_DIR/tools/microspec-config" "$WORK/alone.cfg" --get http.port)
it_start_target "$WORK/alone.cfg" "$WORK/alone-target.log"
it_wait_health "$URL" '"status":"ok"' 60 || it_die "the target did not come up"
curl -s -m 10 "$URL/metrics" >"$WORK/fresh.txt" || it_fail "no /metrics"
check "fresh target, no draft" "$WORK/fresh.txt"
it_finish
