# proc.sh — how cluster/launch.sh and cluster/stop.sh tell that a pid is still
# the node they started (sourced). A pid alone can name another process once
# the node has exited, so each pid in RUN_DIR/pids is recorded with its start
# time (/proc/PID/stat field 22, clock ticks since boot): the pair names one
# process per boot. Where a node runs (pids file's second field): "local",
# "netns:NAME" (this machine's pid space) or an ssh destination.

# proc_run WHERE COMMAND — a shell command where the node runs.
proc_run() {
  local where=$1
  shift
  case "$where" in
    local|netns:*) bash -c "$*" ;;
    *) ssh -n -o BatchMode=yes "$where" "$*" ;;
  esac
}

# proc_start WHERE PID — the process's start time; empty when there is none.
# (The command name in field 2 may hold spaces: the fields are counted after it.)
proc_start() { proc_run "$1" "sed 's/^.*) //' /proc/$2/stat 2>/dev/null | cut -d' ' -f20" 2>/dev/null; }

# proc_is WHERE PID START ROLE — PID is still the node that was recorded: its
# start time is START; with no START (a pids file written before it was
# recorded) its command line runs microspec-ROLE.
proc_is() {
  local now
  now=$(proc_start "$1" "$2")
  [ -n "$now" ] || return 1
  if [ -n "$3" ]; then
    [ "$now" = "$3" ]
  else
    proc_run "$1" "tr '\\0' ' ' </proc/$2/cmdline 2>/dev/null" 2>/dev/null | grep -q -- "microspec-$4 "
  fi
}

# proc_stop WHERE PID START ROLE — SIGTERM, up to 5 s, then SIGKILL, each only
# while proc_is holds. Prints stopped|killed|gone.
proc_stop() {
  local i
  if ! proc_is "$@"; then echo gone; return 0; fi
  proc_run "$1" "kill -TERM $2" 2>/dev/null
  for i in $(seq 1 50); do proc_is "$@" || { echo stopped; return 0; }; sleep 0.1; done
  proc_is "$@" && proc_run "$1" "kill -KILL $2" 2>/dev/null
  echo killed
}
