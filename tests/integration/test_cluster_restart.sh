#!/usr/bin/env bash
# Issue 35 point 3: restarting a node, and stop.sh signalling only its own.
# (a) After a kill -9 of the draft, `launch.sh --restart draft` starts a new
# one with the launch's settings (config, build, logs, link secret), RUN_DIR/pids
# names it (a live process of this config, with its start time), /health shows
# a new join, and a request is served with speculation. (b) `--restart target`
# replaces a running target the same way and the draft rejoins it. (c) stop.sh
# leaves alone a process that holds a recorded node's pid but not its start
# time (a reused pid), and a pid from an old-style pids line whose command line
# is not a node; it stops the real nodes. Before issue 35, launch.sh refused
# --restart and stop.sh signalled any pid it was given.
source "$(dirname "$0")/lib.sh"
it_init restart
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
C_MODEL=$STORIES C_PORT=$(it_port)
it_config "$WORK/restart.cfg"
RUN=$WORK/run
IT_CLEANUP="[ -f $RUN/pids ] && RUN_DIR=$RUN bash $MS_SOURCE_DIR/cluster/stop.sh >/dev/null 2>&1"
printf '%s\n' "[ -f '$RUN/pids' ] && RUN_DIR='$RUN' bash '$MS_SOURCE_DIR/cluster/stop.sh'" >"$WORK/.cleanup" # for the watchdog
ours() { pgrep -f -- "--config $WORK/restart.cfg" || true; }
launch() { RUN_DIR=$RUN timeout 120 bash "$MS_SOURCE_DIR/cluster/launch.sh" "$@" >"$WORK/launch.out" 2>&1; }
pid_of() { awk -v r="$1" '$1 == r { print $3 }' "$RUN/pids"; }
# check_pids — every line names a live node of this config with its recorded start time
check_pids() {
  local role where pid start now
  while read -r role where pid start; do
    IT_PIDS+=("$pid")
    echo "$pid" >>"$WORK/.pids"
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "microspec-$role --config $WORK/restart.cfg" ||
      it_fail "$1: pids names $role $pid, not a running $role of this config"
    now=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f20)
    [ -n "$start" ] && [ "$start" = "$now" ] || it_fail "$1: $role $pid: start time '$start' recorded, '$now' now"
  done <"$RUN/pids"
}
joins() { curl -s -m 5 "$URL/health" | grep -o '"draft_joins":[0-9]*' | cut -d: -f2; }
serve() { # serve WHAT — a request answered with speculation
  "$TOOL" body completions "$WORK/prompt.txt" 24 0 >"$WORK/req.body"
  local code
  code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/req.json")
  [ "$code" = 200 ] || { it_fail "$1: HTTP $code: $(head -c 300 "$WORK/req.json")"; return; }
  [ "$("$TOOL" get "$WORK/req.json" microspec.spec_rounds)" -gt 0 ] || it_fail "$1: no speculation"
}
printf 'Once upon a time, there was a' >"$WORK/prompt.txt"

launch "$WORK/restart.cfg" --build "$MS_BUILD_DIR" --timeout 60 || it_die "launch.sh failed: $(cat "$WORK/launch.out")"
URL=$(cat "$RUN/url")
check_pids launch
it_log "cluster up at $URL: $(tr '\n' ';' <"$RUN/pids")"

# ---- (a) a dead draft -------------------------------------------------------------
old_d=$(pid_of draft)
kill -KILL "$old_d"
it_wait_health "$URL" '"draft":"down"' 30 || it_fail "the target did not mark the killed draft down"
j0=$(joins)
launch --restart draft || it_fail "launch.sh --restart draft: $(cat "$WORK/launch.out")"
new_d=$(pid_of draft)
[ -n "$new_d" ] && [ "$new_d" != "$old_d" ] || it_fail "--restart draft: pids still names the dead draft ($old_d)"
check_pids "restart draft"
it_wait_health "$URL" '"draft":"up"' 30 || it_fail "the restarted draft is not up"
[ "$(joins)" -gt "$j0" ] || it_fail "--restart draft: no new join ($j0 before, $(joins) now)"
[ -s "$RUN/logs/draft.log.1" ] || it_fail "--restart draft: the dead draft's log was not kept"
serve "after --restart draft"

# ---- (b) a running target -----------------------------------------------------------
old_t=$(pid_of target)
launch --restart target || it_fail "launch.sh --restart target: $(cat "$WORK/launch.out")"
new_t=$(pid_of target)
[ -n "$new_t" ] && [ "$new_t" != "$old_t" ] || it_fail "--restart target: pids still names $old_t"
! kill -0 "$old_t" 2>/dev/null || it_fail "--restart target: the old target ($old_t) still runs"
check_pids "restart target"
it_wait_health "$URL" '"draft":"up"' 30 || it_fail "the draft did not rejoin the restarted target"
serve "after --restart target"

# ---- (c) stop.sh and pids that are not the nodes ---------------------------------------
sleep 300 </dev/null >/dev/null 2>&1 &
decoy1=$!
sleep 300 </dev/null >/dev/null 2>&1 &
decoy2=$!
IT_PIDS+=("$decoy1" "$decoy2")
printf '%s\n%s\n' "$decoy1" "$decoy2" >>"$WORK/.pids"
# decoy1 holds a recorded draft's pid with that draft's start time (as if the
# pid had been reused); decoy2 is an old-style line (no start time).
d_start=$(awk '$1 == "draft" { print $4 }' "$RUN/pids")
printf 'draft local %s %s\ndraft local %s\n' "$decoy1" "$d_start" "$decoy2" >>"$RUN/pids"
RUN_DIR=$RUN bash "$MS_SOURCE_DIR/cluster/stop.sh" >"$WORK/stop.out" 2>&1 || it_fail "stop.sh failed: $(cat "$WORK/stop.out")"
cat "$WORK/stop.out"
kill -0 "$decoy1" 2>/dev/null || it_fail "stop.sh killed a process whose start time is not the node's"
kill -0 "$decoy2" 2>/dev/null || it_fail "stop.sh killed a process that is not a node (old-style line)"
for _ in $(seq 1 50); do [ -z "$(ours)" ] && break; sleep 0.1; done
[ -z "$(ours)" ] || it_fail "stop.sh left nodes running: $(ours)"
[ ! -f "$RUN/pids" ] || it_fail "stop.sh left the pids file"
it_finish
