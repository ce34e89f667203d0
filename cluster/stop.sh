#!/usr/bin/env bash
# Stops the cluster cluster/launch.sh started (RUN_DIR, default build/cluster):
# SIGTERM, then SIGKILL after a grace period, locally, in a namespace or over ssh.
# A pid is signalled only while it is still the node launch.sh recorded (same
# start time; cluster/lib/proc.sh): a node that already exited is reported as
# such, and a process that reused its pid is left alone.
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
source "$root/cluster/lib/proc.sh"
run_dir=${RUN_DIR:-$root/build/cluster}
[ -f "$run_dir/pids" ] || { echo "stop.sh: nothing to stop ($run_dir/pids absent)" >&2; exit 0; }
while read -r role where pid start; do
  [ -n "${pid:-}" ] || continue
  case $(proc_stop "$where" "$pid" "${start:-}" "$role") in
    stopped) echo "stop.sh: $role ($pid) stopped" >&2 ;;
    killed) echo "stop.sh: $role ($pid) killed" >&2 ;;
    *) echo "stop.sh: $role ($pid) was not running (exited, or the pid is another process now): not signalled" >&2 ;;
  esac
done <"$run_dir/pids"
rm -f "$run_dir/pids" "$run_dir/url" "$run_dir/link.secret" "$run_dir/launch.vars"
