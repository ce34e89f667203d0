#!/usr/bin/env bash
# Stops the cluster cluster/launch.sh started (RUN_DIR, default build/cluster):
# SIGTERM, then SIGKILL after a grace period, locally, in a namespace or over ssh.
#
#   cluster/stop.sh            (no arguments; RUN_DIR=DIR for another run folder)
set -uo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "stop.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
run_dir=${RUN_DIR:-$root/build/cluster}
[ -f "$run_dir/pids" ] || { echo "stop.sh: nothing to stop ($run_dir/pids absent)" >&2; exit 0; }
sig() { # sig WHERE PID SIGNAL
  case "$1" in
    local|netns:*) kill "-$3" "$2" 2>/dev/null ;;
    *) ssh -o BatchMode=yes "$1" "kill -$3 $2" 2>/dev/null ;;
  esac
}
alive() { case "$1" in local|netns:*) kill -0 "$2" 2>/dev/null ;; *) ssh -o BatchMode=yes "$1" "kill -0 $2" 2>/dev/null ;; esac; }
while read -r role where pid; do
  sig "$where" "$pid" TERM
  for _ in $(seq 1 50); do alive "$where" "$pid" || break; sleep 0.1; done
  if alive "$where" "$pid"; then sig "$where" "$pid" KILL; echo "stop.sh: $role ($pid) killed" >&2
  else echo "stop.sh: $role ($pid) stopped" >&2; fi
done <"$run_dir/pids"
rm -f "$run_dir/pids" "$run_dir/url" "$run_dir/link.secret"
