#!/usr/bin/env bash
# Issue 15: cluster/launch.sh checks its own processes. (a) With the HTTP port
# already served by another target, launch.sh exits non-zero, leaves no pid
# file and no process of its own running (before issue 15 it printed "cluster
# up" from the other node's /health). (b) On a free port it exits 0, its pid
# file names the two live nodes it started (their command lines carry the
# config), and cluster/stop.sh stops exactly those.
source "$(dirname "$0")/lib.sh"
it_init launch
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
port=$(it_port)
C_MODEL=$STORIES C_PORT=$port
it_config "$WORK/launch.cfg"
cat >"$WORK/other.cfg" <<EOF2
target = { model = "$STORIES"; max_ctx = 512; threads = 1; };
draft = { enabled = false; };
http = { listen = "127.0.0.1"; port = $port; };
EOF2
ours() { pgrep -f -- "--config $WORK/launch.cfg" || true; }
launch() { RUN_DIR=$WORK/run timeout 120 bash "$MS_SOURCE_DIR/cluster/launch.sh" "$WORK/launch.cfg" --build "$MS_BUILD_DIR" \
             --timeout 60 --logs "$WORK/run-logs" >"$WORK/launch.out" 2>&1; }

# ---- (a) busy port ------------------------------------------------------------------
it_start_target "$WORK/other.cfg" "$WORK/other-target.log"
it_wait_health "http://127.0.0.1:$port" '"status":"ok"' 60 || it_die "the other target did not come up"
other=$TARGET_PID
launch
rc=$?
[ "$rc" != 0 ] || it_fail "launch.sh on a busy port exited 0: $(cat "$WORK/launch.out")"
[ ! -f "$WORK/run/pids" ] || it_fail "launch.sh on a busy port left a pid file: $(cat "$WORK/run/pids")"
for _ in $(seq 1 50); do [ -z "$(ours)" ] && break; sleep 0.1; done
[ -z "$(ours)" ] || it_fail "launch.sh on a busy port left processes running: $(ours)"
kill -0 "$other" 2>/dev/null || it_fail "launch.sh disturbed the other cluster's target"
it_stop "$other"

# ---- (b) free port ------------------------------------------------------------------------
launch || it_fail "launch.sh on a free port failed: $(cat "$WORK/launch.out")"
if [ -f "$WORK/run/pids" ]; then
  IT_CLEANUP="RUN_DIR=$WORK/run bash $MS_SOURCE_DIR/cluster/stop.sh >/dev/null 2>&1"
  n=0
  while read -r role where pid _; do
    IT_PIDS+=("$pid")
    n=$((n + 1))
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--config $WORK/launch.cfg" ||
      it_fail "pid file: $role $pid is not a running node of this config"
  done <"$WORK/run/pids"
  [ "$n" = 2 ] || it_fail "pid file has $n entries, expected target and draft"
  RUN_DIR=$WORK/run bash "$MS_SOURCE_DIR/cluster/stop.sh" >/dev/null 2>&1 || it_fail "stop.sh failed"
  for _ in $(seq 1 50); do [ -z "$(ours)" ] && break; sleep 0.1; done
  [ -z "$(ours)" ] || it_fail "stop.sh left processes: $(ours)"
else
  it_fail "launch.sh on a free port wrote no pid file"
fi
it_finish
