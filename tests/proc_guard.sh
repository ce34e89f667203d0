#!/usr/bin/env bash
# proc_guard.sh — no process a test starts outlives it (issue 35 point 8: a
# bench test that timed out left its target and draft running for minutes).
#
#   proc_guard.sh run CMD...     run CMD tagged; afterwards kill what it left
#                                running and fail (exit 1) if it left anything
#   proc_guard.sh watch PID TAG  (detached) once PID is gone, kill TAG's processes
#   proc_guard.sh kill TAG       kill TAG's processes now; exit 1 if there were any
#
# A test's processes are found by an environment variable, MS_TEST_TAG=TAG,
# that every descendant inherits — also the nodes cluster/launch.sh starts
# with nohup, which are re-parented to init once launch.sh exits and so are
# not in the test's process tree that ctest kills on a timeout. The watcher
# is detached the same way (double fork, own session) so that a SIGKILL of
# the test's whole tree leaves it to clean up. A process is never matched by
# name, only by its tag; this process and its ancestors are spared.
set -u
# This script's own helpers must not carry a test's tag (they would find themselves).
[ -z "${MS_TEST_TAG:-}" ] || exec env -u MS_TEST_TAG bash "$0" "$@"

# tagged TAG — pids whose environment holds MS_TEST_TAG=TAG (not us, nor our ancestors)
tagged() {
  local tag=$1 f p skip=" $$ $BASHPID " q=$$
  while [ "$q" -gt 1 ] 2>/dev/null; do
    q=$(sed 's/^.*) //' "/proc/$q/stat" 2>/dev/null | cut -d' ' -f2) || break
    [ -n "$q" ] || break
    skip+="$q "
  done
  while read -r f; do
    p=${f#/proc/}
    p=${p%/environ}
    case "$skip" in *" $p "*) ;; *) echo "$p" ;; esac
  done < <(grep -lzx -- "MS_TEST_TAG=$tag" /proc/[0-9]*/environ 2>/dev/null)
}

# reap TAG — SIGKILL TAG's processes (stopped first, so none forks meanwhile),
# a few passes; prints "pid command" for each one found.
reap() {
  local tag=$1 pass p found=()
  for pass in 1 2 3; do
    mapfile -t found < <(tagged "$tag")
    [ ${#found[@]} -gt 0 ] || return 0
    for p in "${found[@]}"; do
      [ "$pass" != 1 ] || echo "$p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | head -c 200)"
      kill -STOP "$p" 2>/dev/null
    done
    for p in "${found[@]}"; do kill -KILL "$p" 2>/dev/null; done
    sleep 0.2
  done
}

case "${1:-}" in
  run)
    shift
    [ $# -gt 0 ] || { echo "proc_guard.sh run: no command" >&2; exit 2; }
    tag=guard-$$-$RANDOM$RANDOM
    ( setsid bash "$0" watch $$ "$tag" </dev/null >/dev/null 2>&1 & )
    MS_TEST_TAG=$tag "$@"
    rc=$?
    left=$(reap "$tag")
    if [ -n "$left" ]; then
      echo "FAIL: processes outlived the test (killed now):"
      sed 's/^/  /' <<<"$left"
      [ "$rc" != 0 ] && [ "$rc" != 77 ] || rc=1
    fi
    exit "$rc" ;;
  watch)
    [ $# = 3 ] || exit 2
    while kill -0 "$2" 2>/dev/null; do sleep 1; done
    reap "$3" >/dev/null
    exit 0 ;;
  kill)
    [ $# = 2 ] || exit 2
    left=$(reap "$2")
    [ -z "$left" ] || { echo "$left"; exit 1; }
    exit 0 ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "proc_guard.sh: run|watch|kill (see --help)" >&2; exit 2 ;;
esac
