#!/usr/bin/env bash
# Starts a MicroSpec cluster described by one configuration file: the target
# node and (when draft.enabled) the draft node, waits for the target's /health
# with a deadline, and prints the URL and where the logs are.
#
#   cluster/launch.sh CONFIG [--build DIR] [--timeout SECONDS] [--logs DIR] [--no-link-secret]
#   cluster/launch.sh --restart target|draft [CONFIG] [--timeout SECONDS]
#
# --restart ROLE restarts one node of the running cluster in RUN_DIR (after it
# died, or to reload it): the node is stopped if it still runs, started again
# with the launch's config, build, logs and link secret (its previous log kept
# as ROLE.log.1), its new pid and start time replace the old in RUN_DIR/pids,
# and the script waits for /health as a launch does (a draft rejoins by its
# own hello). cluster/stop.sh then stops the new process.
#
# hosts.target / hosts.draft in the config say where each node runs:
#   "" | localhost | 127.0.0.1   this machine
#   netns:NAME                   this machine, inside network namespace NAME
#                                (how the two-host test stands two hosts up)
#   anything else                over ssh ([hosts.ssh_user@]host), in
#                                hosts.workdir, which must hold the same
#                                checkout, build and models
# The link is authenticated by default: unless the config sets
# link.secret_file or link.curve, a fresh random secret is written to
# RUN_DIR/link.secret (mode 0600; copied to an ssh host's same folder under
# hosts.workdir) and both nodes get it (--link-secret): the target admits no
# draft that cannot prove it. --no-link-secret starts an open link.
# State (pids with start times, hosts, URL, the launch's settings) goes to
# RUN_DIR (default build/cluster) for cluster/stop.sh and --restart. The cluster is up only when the nodes this script started
# are: a busy HTTP port, or a node of ours that exits or never gets healthy,
# stops what was started, removes the pid file and exits 1.
# Environment: MS_BUILD_DIR (the build, as --build; default build/release).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

source "$root/cluster/lib/proc.sh"

usage() { sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
config="" build="" timeout=60 logs="" run_dir=${RUN_DIR:-$root/build/cluster}
make_secret=1 restart=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --no-link-secret) make_secret=""; shift ;;
    --restart)
      case "${2:-}" in target|draft) restart=$2 ;; *) echo "launch.sh: --restart takes target or draft" >&2; exit 2 ;; esac
      shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "launch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$config" ] || { echo "launch.sh: one CONFIG only" >&2; exit 2; }; config=$1; shift ;;
  esac
done
if [ -n "$restart" ]; then # the launch's settings, unless given again
  [ -f "$run_dir/pids" ] || { echo "launch.sh: --restart: no cluster in $run_dir (no pids file); launch one first" >&2; exit 1; }
  if [ -f "$run_dir/launch.vars" ]; then
    while IFS='=' read -r k val; do
      case "$k" in
        config) [ -n "$config" ] || config=$val ;;
        build) [ -n "$build" ] || build=$val ;;
        logs) [ -n "$logs" ] || logs=$val ;;
      esac
    done <"$run_dir/launch.vars"
  fi
fi
[ -n "$build" ] || build=${MS_BUILD_DIR:-$root/build/release}
[ -n "$config" ] || { usage >&2; exit 2; }
[ -f "$config" ] || { echo "launch.sh: $config: no such file" >&2; exit 2; }
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
for exe in bin/microspec-target bin/microspec-draft tools/microspec-config; do
  [ -x "$build/$exe" ] || { echo "launch.sh: $build/$exe missing: build first (cmake --build $build)" >&2; exit 2; }
done
build=$(cd "$build" && pwd) # recorded for --restart, which may run from elsewhere

cfg() { "$build/tools/microspec-config" "$config" "$@"; }
cfg --check >/dev/null || exit 1
mapfile -t v < <(cfg --get draft.enabled --get http.listen --get http.port --get hosts.target --get hosts.draft \
                     --get hosts.ssh_user --get hosts.workdir --get http.bearer_token --get link.secret_file \
                     --get link.curve.enabled)
draft_enabled=${v[0]} listen=${v[1]} port=${v[2]} host_t=${v[3]} host_d=${v[4]} ssh_user=${v[5]} workdir=${v[6]}
token=${v[7]} secret_cfg=${v[8]} curve=${v[9]}
[ -n "$logs" ] || logs=$run_dir/logs
auth=(); [ -z "$token" ] || auth=(-H "Authorization: Bearer $token")
# A target inside a network namespace is asked from inside it.
probe=(); case "$host_t" in netns:*) probe=(ip netns exec "${host_t#netns:}") ;; esac
mkdir -p "$run_dir" "$logs"
logs=$(cd "$logs" && pwd)
if [ -z "$restart" ] && [ -f "$run_dir/pids" ]; then
  echo "launch.sh: a cluster seems to be running ($run_dir/pids); stop it first with cluster/stop.sh," \
       "or restart one node with --restart target|draft" >&2
  exit 1
fi

# Something already listening on the target's port would answer our health
# probe for a node that cannot bind it.
port_busy() { # port_busy ADDR PORT (local ports only)
  local a=$1
  [ "$a" != 0.0.0.0 ] || a=127.0.0.1
  [ "$a" != "::" ] || a=::1
  [ "$a" != localhost ] || a=127.0.0.1
  (exec 3<>"/dev/tcp/$a/$2") 2>/dev/null
}
check_port() {
  case "$host_t" in
    ""|localhost|127.0.0.1)
      if port_busy "$listen" "$port"; then
        echo "launch.sh: port $port on $listen is already in use (another cluster?); nothing started" >&2
        exit 1
      fi ;;
  esac
}
[ -n "$restart" ] || check_port

# The cluster's link secret (see above): fresh for every launch.
secret=""
if [ -n "$restart" ]; then # the secret the other node holds
  [ ! -f "$run_dir/link.secret" ] || secret=$run_dir/link.secret
elif [ -n "$make_secret" ] && [ "$draft_enabled" = true ] && [ -z "$secret_cfg" ] && [ "$curve" != true ]; then
  secret=$run_dir/link.secret
  rm -f "$secret"
  ( umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret" ) ||
    { echo "launch.sh: cannot write the link secret $secret" >&2; exit 1; }
fi

# abort MESSAGE — stop what this run started (local nodes), forget it, exit 1.
started=()
abort() {
  echo "launch.sh: $*" >&2
  local p i
  for p in "${started[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${started[@]}"; do
    for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  # A restart keeps the cluster's state: the other node still runs.
  [ -n "$restart" ] || rm -f "$run_dir/pids" "$run_dir/url" "$run_dir/link.secret" "$run_dir/launch.vars"
  exit 1
}

# start ROLE HOST EXE → prints "HOST PID"
start() {
  local role=$1 host=$2 exe=$3 log=$logs/$1.log
  local extra=()
  [ -z "$secret" ] || extra=(--link-secret "$secret")
  case "$host" in
    ""|localhost|127.0.0.1)
      nohup "$build/$exe" --config "$config" "${extra[@]}" >"$log" 2>&1 </dev/null &
      echo "local $!" ;;
    netns:*)
      nohup ip netns exec "${host#netns:}" "$build/$exe" --config "$config" "${extra[@]}" >"$log" 2>&1 </dev/null &
      echo "$host $!" ;;
    *)
      local dest=$host; [ -z "$ssh_user" ] || dest=$ssh_user@$host
      local wd=${workdir:-$root}
      local pid rsecret=""
      if [ -n "$secret" ]; then # the same folder on the remote checkout, only its owner may read it
        rsecret=${secret/#$root/$wd}
        ssh -o BatchMode=yes "$dest" "umask 077 && mkdir -p '$(dirname "$rsecret")' && cat >'$rsecret'" <"$secret" ||
          { echo "launch.sh: cannot copy the link secret to $dest:$rsecret" >&2; return 1; }
        rsecret="--link-secret '$rsecret'"
      fi
      pid=$(ssh -o BatchMode=yes "$dest" "cd '$wd' && nohup '$build/$exe' --config '$config' $rsecret >'$log' 2>&1 </dev/null & echo \$!")
      echo "$dest $pid" ;;
  esac
}

if [ -z "$restart" ]; then
  echo "launch.sh: starting the target (${host_t:-local})" >&2
  read -r where_t pid_t < <(start target "$host_t" bin/microspec-target)
  echo "target $where_t $pid_t $(proc_start "$where_t" "$pid_t")" >"$run_dir/pids"
  [ "$where_t" != local ] || started+=("$pid_t")
  printf 'config=%s\nbuild=%s\nlogs=%s\n' "$config" "$build" "$logs" >"$run_dir/launch.vars"
  where_d="" pid_d=""
  if [ "$draft_enabled" = true ]; then
    echo "launch.sh: starting the draft (${host_d:-local})" >&2
    read -r where_d pid_d < <(start draft "$host_d" bin/microspec-draft)
    echo "draft $where_d $pid_d $(proc_start "$where_d" "$pid_d")" >>"$run_dir/pids"
    [ "$where_d" != local ] || started+=("$pid_d")
  fi
else
  [ "$restart" = target ] || [ "$draft_enabled" = true ] || { echo "launch.sh: --restart draft: draft.enabled is false" >&2; exit 1; }
  where_t="" pid_t="" where_d="" pid_d="" where_o="" pid_o="" start_o=""
  read -r _ where_t pid_t _ < <(grep '^target ' "$run_dir/pids") || true
  read -r _ where_d pid_d _ < <(grep '^draft ' "$run_dir/pids") || true
  read -r _ where_o pid_o start_o < <(grep "^$restart " "$run_dir/pids") || true
  if [ -n "${pid_o:-}" ]; then
    how=$(proc_stop "$where_o" "$pid_o" "${start_o:-}" "$restart")
    [ "$how" = gone ] || echo "launch.sh: the running $restart ($pid_o) $how" >&2
  fi
  [ "$restart" = draft ] || check_port
  host=$host_t
  [ "$restart" = target ] || host=$host_d
  joins0=-1 # a restarted draft is up once the target counts a new join
  if [ "$restart" = draft ]; then
    joins0=$("${probe[@]}" curl -s -m 2 "${auth[@]}" "$(cat "$run_dir/url")/health" 2>/dev/null | grep -o '"draft_joins":[0-9]*' | cut -d: -f2) || true
    [ -n "$joins0" ] || joins0=0
  fi
  [ ! -f "$logs/$restart.log" ] || mv -f "$logs/$restart.log" "$logs/$restart.log.1"
  echo "launch.sh: restarting the $restart (${host:-local})" >&2
  read -r where pid < <(start "$restart" "$host" "bin/microspec-$restart")
  [ "$where" != local ] || started+=("$pid")
  line="$restart $where $pid $(proc_start "$where" "$pid")"
  # The new line replaces the old one in place (stop.sh stops the target first).
  awk -v r="$restart" -v line="$line" '$1 == r { print line; done = 1; next } { print } END { if (!done) print line }' \
    "$run_dir/pids" >"$run_dir/pids.new" && mv -f "$run_dir/pids.new" "$run_dir/pids"
  if [ "$restart" = target ]; then where_t=$where pid_t=$pid; else where_d=$where pid_d=$pid; fi
  [ "$draft_enabled" = true ] || where_d="" pid_d=""
fi
# ours_alive — the local nodes of this cluster are still running
ours_alive() {
  if [ "${where_t:-}" = local ] && ! kill -0 "$pid_t" 2>/dev/null; then echo target; return 1; fi
  if [ "${where_d:-}" = local ] && ! kill -0 "$pid_d" 2>/dev/null; then echo draft; return 1; fi
  return 0
}

# The URL as a client reaches it: the target host's address when it is remote.
addr=$listen
case "$host_t" in ""|localhost|127.0.0.1|netns:*) ;; *) [ "$listen" != 127.0.0.1 ] || addr=$host_t ;; esac
[ "$addr" != 0.0.0.0 ] || addr=127.0.0.1
url="http://$addr:$port"
echo "$url" >"$run_dir/url"

# Wait for /health (and for the draft to join when there is one).
deadline=$((SECONDS + timeout))
health=""
while [ $SECONDS -lt $deadline ]; do
  if health=$("${probe[@]}" curl -s -m 2 "${auth[@]}" "$url/health" 2>/dev/null) && [ -n "$health" ]; then
    joins=$(grep -o '"draft_joins":[0-9]*' <<<"$health" | cut -d: -f2) || joins=0
    if [ "$draft_enabled" != true ] || { grep -q '"draft":"up"' <<<"$health" && [ "${joins:-0}" -gt "${joins0:-0}" ]; }; then break; fi
  fi
  if ! dead=$(ours_alive); then
    echo "launch.sh: the $dead exited; its log ($logs/$dead.log) ends with:" >&2
    tail -n 20 "$logs/$dead.log" >&2
    abort "the cluster did not come up"
  fi
  sleep 0.2
done
if [ -z "$health" ] || { [ "$draft_enabled" = true ] && ! grep -q '"draft":"up"' <<<"$health"; }; then
  abort "no healthy cluster within ${timeout}s (health: ${health:-no answer}); logs in $logs"
fi
# The answer must have come from our own target, still running.
dead=$(ours_alive) || abort "the $dead exited right after /health answered (another process on port $port?); logs in $logs"
[ -z "$restart" ] || echo "launch.sh: the $restart restarted (pid $pid)" >&2
echo "MicroSpec cluster up: $url"
echo "  health: $health"
echo "  logs:   $logs/target.log${draft_enabled:+ $( [ "$draft_enabled" = true ] && echo "$logs/draft.log")}"
[ -z "$secret" ] || echo "  link:   authenticated with $secret"
echo "  stop:   RUN_DIR=$run_dir cluster/stop.sh"
