#!/usr/bin/env bash
# Starts a MicroSpec cluster described by one configuration file: the target
# node and (when draft.enabled) the draft node, waits for the target's /health
# with a deadline, and prints the URL and where the logs are.
#
#   cluster/launch.sh CONFIG [--build DIR] [--timeout SECONDS] [--logs DIR]
#
# hosts.target / hosts.draft in the config say where each node runs:
#   "" | localhost | 127.0.0.1   this machine
#   netns:NAME                   this machine, inside network namespace NAME
#                                (how the two-host test stands two hosts up)
#   anything else                over ssh ([hosts.ssh_user@]host), in
#                                hosts.workdir, which must hold the same
#                                checkout, build and models
# State (pids, hosts, URL) goes to RUN_DIR (default build/cluster) for
# cluster/stop.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
config="" build="$root/build/release" timeout=60 logs="" run_dir=${RUN_DIR:-$root/build/cluster}
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "launch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$config" ] || { echo "launch.sh: one CONFIG only" >&2; exit 2; }; config=$1; shift ;;
  esac
done
[ -n "$config" ] || { usage >&2; exit 2; }
[ -f "$config" ] || { echo "launch.sh: $config: no such file" >&2; exit 2; }
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
for exe in bin/microspec-target bin/microspec-draft tools/microspec-config; do
  [ -x "$build/$exe" ] || { echo "launch.sh: $build/$exe missing: build first (cmake --build $build)" >&2; exit 2; }
done

cfg() { "$build/tools/microspec-config" "$config" "$@"; }
cfg --check >/dev/null || exit 1
mapfile -t v < <(cfg --get draft.enabled --get http.listen --get http.port --get hosts.target --get hosts.draft \
                     --get hosts.ssh_user --get hosts.workdir --get http.bearer_token)
draft_enabled=${v[0]} listen=${v[1]} port=${v[2]} host_t=${v[3]} host_d=${v[4]} ssh_user=${v[5]} workdir=${v[6]}
token=${v[7]}
[ -n "$logs" ] || logs=$run_dir/logs
mkdir -p "$run_dir" "$logs"
if [ -f "$run_dir/pids" ]; then
  echo "launch.sh: a cluster seems to be running ($run_dir/pids); stop it first with cluster/stop.sh" >&2
  exit 1
fi

# start ROLE HOST EXE → prints "HOST PID"
start() {
  local role=$1 host=$2 exe=$3 log=$logs/$1.log
  case "$host" in
    ""|localhost|127.0.0.1)
      nohup "$build/$exe" --config "$config" >"$log" 2>&1 </dev/null &
      echo "local $!" ;;
    netns:*)
      nohup ip netns exec "${host#netns:}" "$build/$exe" --config "$config" >"$log" 2>&1 </dev/null &
      echo "$host $!" ;;
    *)
      local dest=$host; [ -z "$ssh_user" ] || dest=$ssh_user@$host
      local wd=${workdir:-$root}
      local pid
      pid=$(ssh -o BatchMode=yes "$dest" "cd '$wd' && nohup '$build/$exe' --config '$config' >'$log' 2>&1 </dev/null & echo \$!")
      echo "$dest $pid" ;;
  esac
}

echo "launch.sh: starting the target (${host_t:-local})" >&2
read -r where_t pid_t < <(start target "$host_t" bin/microspec-target)
echo "target $where_t $pid_t" >"$run_dir/pids"
if [ "$draft_enabled" = true ]; then
  echo "launch.sh: starting the draft (${host_d:-local})" >&2
  read -r where_d pid_d < <(start draft "$host_d" bin/microspec-draft)
  echo "draft $where_d $pid_d" >>"$run_dir/pids"
fi

# The URL as a client reaches it: the target host's address when it is remote.
addr=$listen
case "$host_t" in ""|localhost|127.0.0.1|netns:*) ;; *) [ "$listen" != 127.0.0.1 ] || addr=$host_t ;; esac
[ "$addr" != 0.0.0.0 ] || addr=127.0.0.1
url="http://$addr:$port"
echo "$url" >"$run_dir/url"

# Wait for /health (and for the draft to join when there is one).
auth=(); [ -z "$token" ] || auth=(-H "Authorization: Bearer $token")
# A target inside a network namespace is asked from inside it.
probe=(); case "$host_t" in netns:*) probe=(ip netns exec "${host_t#netns:}") ;; esac
deadline=$((SECONDS + timeout))
health=""
while [ $SECONDS -lt $deadline ]; do
  if health=$("${probe[@]}" curl -s -m 2 "${auth[@]}" "$url/health" 2>/dev/null) && [ -n "$health" ]; then
    if [ "$draft_enabled" != true ] || grep -q '"draft":"up"' <<<"$health"; then break; fi
  fi
  if [ "$where_t" = local ] && ! kill -0 "$pid_t" 2>/dev/null; then
    echo "launch.sh: the target exited; its log ($logs/target.log) ends with:" >&2
    tail -n 20 "$logs/target.log" >&2
    rm -f "$run_dir/pids"
    exit 1
  fi
  sleep 0.2
done
if [ -z "$health" ] || { [ "$draft_enabled" = true ] && ! grep -q '"draft":"up"' <<<"$health"; }; then
  echo "launch.sh: no healthy cluster within ${timeout}s (health: ${health:-no answer}); logs in $logs" >&2
  exit 1
fi
echo "MicroSpec cluster up: $url"
echo "  health: $health"
echo "  logs:   $logs/target.log${draft_enabled:+ $( [ "$draft_enabled" = true ] && echo "$logs/draft.log")}"
echo "  stop:   RUN_DIR=$run_dir cluster/stop.sh"
